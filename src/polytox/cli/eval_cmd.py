"""``polytox eval``: generate K continuations per prompt, score them, report RTP/PTP metrics.

Every flag maps to a spec field; ``--config FILE`` (YAML, same key names) builds the same spec, and flags
given on the command line override it. Rerunning the same command with the same ``--out`` resumes.

``--retry-failed`` (with ``--out OUT``, or as ``--retry-failed OUT``) resumes the run and regenerates its
failed samples with their original seeds, rescores them and recomputes the metrics. Without spec flags
(``polytox eval --out OUT``) an existing run resumes with the spec stored in ``OUT``: the command that
repairs a damaged run. After the table, a summary lists what failed. Exit codes: 0 done
(failures within ``--max-failed``), 2 bad input, 3 more failed samples than ``--max-failed`` (default
0.5%), 4 generation stopped (engine dead, server gone: rerun the printed command to resume).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from rich.markup import escape

from .. import settings as S
from ..api.resolve import Resolved, command_settings, resolve_out, resolve_run
from ..api.resolve import executor_config as _executor_config
from ..executors import ExecutorConfig
from ..spec import EvalSpec
from .common import console, metrics_table, out_console, print_json, progress_bar
from .failure_report import exit_code, failure_lines, parse_max_failed, retry_line
from .flags import argument

DESCRIPTION = """\
Evaluate a model: generate K continuations per prompt, score them, and report the RTP / PTP metrics
(expected maximum toxicity, toxicity probability, average toxicity).

Every flag but --config, --retry-failed, --generations-from, --json, --no-progress and --debug has a key
of the same name for --config FILE (YAML), --out, --max-failed and --verify included; flags given on the
command line override the file. Rerunning the same command with the same --out resumes. --retry-failed
regenerates a run's failed samples with their original seeds and recomputes the metrics; `polytox eval
--out RUN` alone resumes (or repairs) a run with the settings stored in it. Exit codes: 0 done (failures
within --max-failed), 2 bad input, 3 more failed samples than --max-failed (default 0.5%), 4 generation
stopped (rerun the printed command to resume).

example:
  polytox eval --model gpt2 --prompts allenai/real-toxicity-prompts --preset rtp --out runs/gpt2-rtp
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a model: generate, score, report metrics (resumable)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_setting_flags(p, [S.BY_KEY["out"]])
    p.add_argument("--config", help="YAML file of the same keys as the flags (flags override it)")
    add_setting_flags(p, (s for s in S.TABLE if s.flag and s.section not in ("executor", "command")))
    _add_execution_flags(p)
    p.set_defaults(func=run)


def add_setting_flags(p: Any, settings: Iterable[S.Setting]) -> None:
    """One flag per row of the settings table (``flags.argument``), default None: a flag not given leaves
    the value to ``--config`` or the table's default."""
    for s in settings:
        argument(p, s, unset=True)


def _add_execution_flags(p: argparse.ArgumentParser) -> None:
    """The flags that are not part of the spec: execution, failures, adopting a run, output."""
    x = p.add_argument_group("execution (not part of the spec: a run may resume with other settings)")
    add_setting_flags(x, S.rows("executor"))  # --executor: the executors the package has (a test keeps them)
    f = p.add_argument_group("failures (not part of the spec)")
    f.add_argument(
        "--retry-failed",
        nargs="?",
        const=True,
        default=None,
        metavar="OUT",
        help="resume OUT (or --out) and regenerate its failed samples with their original seeds, "
        "then rescore and recompute the metrics; without spec flags, OUT's stored spec is used",
    )
    add_setting_flags(f, [S.BY_KEY["max_failed"]])
    p.add_argument(
        "--generations-from",
        metavar="RUN",
        help="score RUN's stored generations instead of generating (generate on a GPU host, score "
        "elsewhere; rescore a run with another scorer). The spec must be RUN's but for the "
        "scorer and the prompt file's path; without a config, RUN's spec is taken and the "
        "flags given override it",
    )
    add_setting_flags(p, [S.BY_KEY["verify"]])
    p.add_argument("--json", action="store_true", help="print metrics as JSON instead of a table")
    p.add_argument("--no-progress", action="store_true")


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gave, by table key (None: not given)."""
    return {key: getattr(args, key, None) for key in S.CONFIG_KEYS - S.COMMAND_KEYS}


def executor_config(flat: dict[str, Any], args: argparse.Namespace) -> ExecutorConfig:
    """Pop the execution keys out of ``flat`` (YAML) and overlay the flags (``api.resolve.executor_config``)."""
    return _executor_config(flat, given(args))


def resolved(args: argparse.Namespace) -> Resolved:
    """The spec, executor and run directory of parsed ``eval`` arguments (``api.resolve.resolve_run``)."""
    return resolve_run(
        given(args),
        config=args.config,
        out=args.out,
        retry_failed=getattr(args, "retry_failed", None),
        generations_from=getattr(args, "generations_from", None),
    )


def spec_from_args(args: argparse.Namespace) -> EvalSpec:
    """The spec of parsed ``eval`` arguments (what ``--config`` and the flags build together)."""
    return resolved(args).spec


def verify(out: str) -> int:
    """``eval --out RUN --verify``: what is stored on stdout, each damaged file on stderr; exit 2 if any."""
    from ..store.files import repair_command
    from ..store.reader import RunReader

    store = RunReader(out)
    notes, problems = store.verify()
    for line in notes:
        print(line)
    if not problems:
        print("no damage found")
        return 0
    console.print(
        f"polytox: error: {out}: {len(problems)} damaged file(s); repair with: {repair_command(out)}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for line in problems:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    return 2


def run(args: argparse.Namespace) -> int:
    from ..api import evaluate
    from ..runner import retry_command

    command = command_settings({key: getattr(args, key) for key in S.COMMAND_KEYS}, args.config)
    args.out = resolve_out(command["out"], args.retry_failed)
    if command["verify"]:
        return verify(args.out)
    max_failed = parse_max_failed(command["max_failed"])
    with progress_bar("generate+score", enabled=not args.no_progress) as callback:
        result = evaluate(
            out=args.out,
            config=args.config,
            retry_failed=bool(args.retry_failed),
            generations_from=args.generations_from,
            progress=callback,
            **{k: v for k, v in given(args).items() if v is not None},
        )
    if result.resumed:
        done = result.shards_done_before
        console.print(f"resumed {escape(str(result.path))}: {done} shard(s) were already done")
    for line in result.repairs:
        console.print(f"repaired: {line}", markup=False, highlight=False, soft_wrap=True)
    if result.resumed:
        from ..store.reader import RunReader

        note = RunReader(result.path).unchecksummed_note()
        if note is not None:
            console.print(note, markup=False, highlight=False, soft_wrap=True, style="yellow")
    prompt_set = result.prompt_set
    assert prompt_set is not None  # a run evaluate() made
    if prompt_set.problems:
        console.print(f"[yellow]skipped {prompt_set.n_bad} bad record(s):[/yellow]")
        for line in prompt_set.problems[:20]:
            # no markup (a reason may hold "[0, 1]") and no wrapping (keep file:line greppable)
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    for note in prompt_set.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    if args.json:
        print_json(result.metrics)
    else:
        title = f"{result.spec.generation.model} · {result.metrics.get('scorer')} · {result.path}"
        out_console.print(metrics_table(result.metrics, title=title))
    if "unprompted" in result.metrics:
        from .unprompted_cmd import unprompted_table, write_plot

        report, model = result.metrics["unprompted"], result.spec.generation.model
        plotted = write_plot({model: report}, result.path / "unprompted.png")
        if not args.json:
            out_console.print(unprompted_table(report, title=f"unprompted toxicity · {model}"))
            plot_note = f"; plot: {plotted}" if plotted else ""
            console.print(f"curve: {result.path / 'unprompted.json'}{plot_note}")
    if result.retry is not None:
        console.print(retry_line(result.retry), markup=False, highlight=False)
    for line in failure_lines(result.failures, max_failed, retry_command(result.path)):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return exit_code(result.failures, max_failed)
