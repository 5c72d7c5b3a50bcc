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
import dataclasses
from typing import Any

from rich.markup import escape

from ..errors import BadValueError, PolytoxError
from ..executors import EXECUTORS, ExecutorConfig
from ..spec import FLAT_KEYS, PRESETS, EvalSpec, as_number, read_config, spec_from_flat
from .common import console, metrics_table, out_console, print_json, progress_bar
from .failure_report import DEFAULT_MAX_FAILED, exit_code, failure_lines, parse_max_failed, retry_line


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a model: generate, score, report metrics (resumable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="run directory (rerun with the same --out to resume); required")
    p.add_argument("--config", help="YAML file of the same keys as the flags (flags override it)")
    p.add_argument("--model", help="model id or path; 'fake' for a dry run; default: the embedded SmolLM2")
    p.add_argument("--backend", help="generation backend (default: inferred from --model)")
    p.add_argument("--model-opt", action="append", metavar="KEY=VALUE", help="backend option (repeatable)")
    p.add_argument("--prompts", help="'demo', a JSONL/CSV/Parquet file or folder, or a HF dataset id")
    p.add_argument("--format", choices=["auto", "rtp", "ptp", "rtplx", "generic"], help="prompt record format")
    p.add_argument("--hf-config", help="HF dataset config, e.g. ptp-en")
    p.add_argument("--hf-split", help="HF dataset split, e.g. small")
    p.add_argument("--limit", type=int, help="use the first N selected prompts")
    p.add_argument("--lang", action="append", help="keep only these languages (repeatable or comma list)")
    p.add_argument("--per-bucket", type=int, help="seeded stratified sample: N prompts per toxicity bucket")
    p.add_argument("--skip-bad", action="store_true", default=None, help="skip (and list) bad input records")
    p.add_argument("--preset", choices=["rtp", "ptp"], help="the paper's exact sampling settings")
    p.add_argument("--samples", "-k", type=int, help="continuations per prompt (K)")
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--batch-size", type=int, help="prompts per forward pass (0 = automatic)")
    p.add_argument("--chat-template", choices=["auto", "always", "never"])
    p.add_argument("--device")
    p.add_argument("--dtype")
    p.add_argument(
        "--scorer", help="scorer name (default: 'default', polytox-ml for PTP's 17 languages, routed per language)"
    )
    p.add_argument("--scorer-opt", action="append", metavar="KEY=VALUE", help="scorer option (repeatable)")
    p.add_argument("--threshold", type=float, help="toxic threshold (default 0.5)")
    p.add_argument("--comparison", choices=[">=", ">"], help="toxic comparison (default >=; RTP notebooks: >)")
    p.add_argument("--n-bootstrap", type=int, help="bootstrap resamples for the CIs (default 1000)")
    p.add_argument("--seed", type=int)
    p.add_argument("--shard-size", type=int, help="prompts per committed part (the unit redone after a kill)")
    p.add_argument(
        "--detox",
        metavar="NAME[:KEY=VALUE,...]",
        help="decoding-time detoxification (RTP §5.2, DExperts): word-filter, vocab-shift, pplm, "
        "dexperts, atcon; see docs/detox.md",
    )
    p.add_argument(
        "--fluency-model",
        metavar="MODEL",
        help="add the perplexity of each continuation given its prompt under this LM",
    )
    p.add_argument(
        "--fluency-samples",
        type=int,
        metavar="N",
        help="score fluency only on the continuations with sample_index < N of every prompt (the "
        "same N for each prompt, so the subsample is fixed and paired across runs with the same "
        "seeds); default 0 = all",
    )
    p.add_argument(
        "--unprompted",
        type=int,
        metavar="N",
        help="RTP §3.1: N generations from the start token alone (no prompts), then the "
        "bootstrap curve of expected max toxicity for n <= N (table + RUN/unprompted.png)",
    )
    _add_execution_flags(p)
    p.set_defaults(func=run)


def _add_execution_flags(p: argparse.ArgumentParser) -> None:
    """The flags that are not part of the spec: execution, failures, adopting a run, output."""
    x = p.add_argument_group("execution (not part of the spec: a run may resume with other settings)")
    x.add_argument(
        "--executor",
        choices=list(EXECUTORS),
        help="pipelined (default: scoring overlaps generation), serial, or ray (Ray Data pools)",
    )
    x.add_argument("--ray-address", help="Ray cluster to join ('auto', 'ray://HOST:10001'); default: start a local Ray")
    x.add_argument("--workers", type=int, help="ray: generation actors (default 1)")
    x.add_argument("--score-workers", type=int, help="ray: scoring actors (default 1)")
    x.add_argument("--gpus-per-worker", type=float, help="ray: GPUs per generation actor (default 0)")
    x.add_argument("--score-gpus-per-worker", type=float, help="ray: GPUs per scoring actor (default 0)")
    x.add_argument("--cpus-per-worker", type=float, help="ray: CPUs per actor (default 1)")
    x.add_argument("--queue-depth", type=int, help="pipelined: generated shards waiting for the scorer (2)")
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
    f.add_argument(
        "--max-failed",
        default=DEFAULT_MAX_FAILED,
        metavar="N%|SHARE|COUNT",
        help="failed samples allowed before the exit code is 3 (default 0.5%%)",
    )
    p.add_argument(
        "--generations-from",
        metavar="RUN",
        help="score RUN's stored generations instead of generating (generate on a GPU host, score "
        "elsewhere; rescore a run with another scorer). The spec must be RUN's but for the "
        "scorer and the prompt file's path; without a config, RUN's spec is taken and the "
        "flags given override it",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every stored file of the run --out (manifest, prompts, each part: checksum, row count, "
        "prompt ids, spec hash) and report; changes nothing ('polytox eval --out RUN' repairs what it finds)",
    )
    p.add_argument("--json", action="store_true", help="print metrics as JSON instead of a table")
    p.add_argument("--no-progress", action="store_true")


# Execution flags (CLI name -> ExecutorConfig field); also accepted as keys of a YAML config.
EXECUTOR_KEYS = {
    "executor": "kind",
    "ray_address": "ray_address",
    "workers": "gen_workers",
    "score_workers": "score_workers",
    "gpus_per_worker": "gpus_per_gen_worker",
    "score_gpus_per_worker": "gpus_per_score_worker",
    "cpus_per_worker": "cpus_per_worker",
    "queue_depth": "queue_depth",
}


# Every key a YAML config of ``eval`` (and of ``score`` / ``serve``, which read its scorer keys) may hold.
CONFIG_KEYS = frozenset(FLAT_KEYS) | frozenset(EXECUTOR_KEYS)


def executor_config(flat: dict[str, Any], args: argparse.Namespace) -> ExecutorConfig:
    """Pop the execution keys out of ``flat`` (YAML) and overlay the flags."""
    kinds = {f.name: str(f.type).split(" | ")[0] for f in dataclasses.fields(ExecutorConfig)}
    values = {field: flat.pop(key) for key, field in EXECUTOR_KEYS.items() if key in flat}
    values.update(
        {field: getattr(args, key) for key, field in EXECUTOR_KEYS.items() if getattr(args, key, None) is not None}
    )
    field_key = {field: key for key, field in EXECUTOR_KEYS.items()}
    for field, value in values.items():
        kind = kinds[field]
        if value is not None and kind in ("int", "float"):
            values[field] = as_number(field_key[field], value, kind)
        elif value is not None and kind == "str" and not isinstance(value, str):
            raise BadValueError(
                f"invalid value for {field_key[field]!r}: expected a string, got {value!r}", field_key[field]
            )
    return ExecutorConfig(**values)


def spec_and_executor(args: argparse.Namespace) -> tuple[EvalSpec, ExecutorConfig]:
    """The spec and the executor of parsed ``eval`` arguments: the YAML config's keys, overridden by flags.

    A bad value read from the config is reported at its ``FILE:LINE``. ``--retry-failed`` with neither a
    config nor a spec flag: the spec stored in the run directory.
    """
    config = read_config(args.config, CONFIG_KEYS) if args.config else None
    flat: dict[str, Any] = dict(config.data) if config else {}
    from_flags = {key for key in (*FLAT_KEYS, *EXECUTOR_KEYS) if getattr(args, key, None) is not None}
    try:
        executor = executor_config(flat, args)
        for key in FLAT_KEYS:
            value = getattr(args, key, None)
            if value is not None:
                flat[key] = value
        if not flat and not args.config and args.out:
            from ..store import RunStore

            store = RunStore(args.out)
            if getattr(args, "retry_failed", None):
                return store.spec(), executor
            # ``eval --out RUN`` alone resumes (and repairs) RUN with the spec it recorded
            if not getattr(args, "generations_from", None) and (store.exists() or store.recorded_spec()):
                return store.spec(), executor
        if getattr(args, "generations_from", None) and not args.config:
            return source_spec(args.generations_from, flat), executor
        return spec_from_flat(flat), executor
    except BadValueError as exc:
        # the error names a flat key or a spec field; point at the config line it came from
        keys = [k for k in (exc.key, *(k for k, (_, f) in FLAT_KEYS.items() if f == exc.key)) if k]
        found = next((k for k in keys if config is not None and k in config.data and k not in from_flags), None)
        if config is None or found is None:
            raise
        raise BadValueError(f"{config.where(found)}: {exc}", exc.key) from exc


def source_spec(path: str, flat: dict[str, Any]) -> EvalSpec:
    """``--generations-from RUN`` without a config: RUN's stored spec, with each field a flag names replaced
    by the flag's value (converted as a fresh spec would convert it; ``--model`` sets the backend too)."""
    from ..executors.adopt import source_run

    data = source_run(path).spec().to_dict()
    if not flat:
        return EvalSpec.from_dict(data)
    given = spec_from_flat(flat).to_dict()  # an unknown preset or bad value fails here, clearly
    fields = [FLAT_KEYS[key] for key in flat]
    if "model" in flat:
        fields.append(("generation", "backend"))
    if "scorer" in flat:
        fields.append(("scorer", "options"))  # another scorer starts from its own options, not RUN's
    if "preset" in flat:
        fields += [("generation", name) for name in PRESETS[flat["preset"]]]
    for section, name in fields:
        if section:
            data[section][name] = given[section][name]
        else:
            data[name] = given[name]
    return EvalSpec.from_dict(data)


def resolve_out(args: argparse.Namespace) -> None:
    """``--retry-failed OUT`` names the run directory; ``--out`` must then be absent or the same."""
    named = args.retry_failed if isinstance(args.retry_failed, str) else None
    if named is not None and args.out is not None and named != args.out:
        raise PolytoxError(f"--retry-failed {named} and --out {args.out} name different run directories")
    args.out = args.out or named
    if args.out is None:
        raise PolytoxError("polytox eval needs --out DIR (the run directory)")


def spec_from_args(args: argparse.Namespace) -> EvalSpec:
    """The spec of parsed ``eval`` arguments (what ``--config`` and the flags build together)."""
    return spec_and_executor(args)[0]


def verify(out: str) -> int:
    """``eval --out RUN --verify``: what is stored on stdout, each damaged file on stderr; exit 2 if any."""
    from ..store import RunStore, repair_command

    store = RunStore(out)
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
    from ..runner import evaluate, retry_command
    from ..store import RunStore

    resolve_out(args)
    if args.verify:
        return verify(args.out)
    if args.retry_failed and not RunStore(args.out).exists():
        raise PolytoxError(
            f"--retry-failed: {args.out} is not a run directory (no manifest.json), so there is "
            "nothing to retry; start the run without --retry-failed"
        )
    max_failed = parse_max_failed(args.max_failed)
    spec, executor = spec_and_executor(args)
    with progress_bar("generate+score", enabled=not args.no_progress) as callback:
        result = evaluate(
            spec,
            args.out,
            progress=callback,
            executor=executor,
            retry_failed=bool(args.retry_failed),
            generations_from=args.generations_from,
        )
    if result.resumed:
        done = result.shards_done_before
        console.print(f"resumed {escape(str(result.path))}: {done} shard(s) were already done")
    for line in result.repairs:
        console.print(f"repaired: {line}", markup=False, highlight=False, soft_wrap=True)
    if result.resumed:
        from ..store import RunStore

        note = RunStore(result.path).unchecksummed_note()
        if note is not None:
            console.print(note, markup=False, highlight=False, soft_wrap=True, style="yellow")
    if result.prompt_set.problems:
        console.print(f"[yellow]skipped {result.prompt_set.n_bad} bad record(s):[/yellow]")
        for line in result.prompt_set.problems[:20]:
            # no markup (a reason may hold "[0, 1]") and no wrapping (keep file:line greppable)
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    for note in result.prompt_set.notes:
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
