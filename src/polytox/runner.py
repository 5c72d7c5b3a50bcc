"""``execute_run``: prompts -> K continuations each -> scores -> metrics, in one straight line.

Read top to bottom, it is the method section of a paper:

1. load and validate the prompts (bad input stops here, before any work);
2. build the scorer and check it covers every prompt language;
3. lock the run directory (one writer at a time: a second one is refused, naming the holder), open it
   (create it, or resume it if the spec matches), and check every stored part: a damaged one is removed,
   so its shard is made again; with ``generations_from``, copy another run's stored generations into it
   (same spec but the scorer), so that only scoring is left;
4. for each shard of prompts not yet done: generate K samples per prompt, write them; score them,
   write the scores (each write atomic, so a kill loses at most the shards in flight); an executor
   (``polytox.executors``: serial, pipelined, Ray Data) runs this step;
5. with ``retry_failed``, regenerate the failed samples with their original seeds and rescore their
   shards (``executors.retry``);
6. compute metrics over everything stored, write ``metrics.json``, and record what failed (by error kind)
   in the manifest.

When the backend fails fatally (``FatalGenerationError``: engine dead, server gone, model not loadable),
no further shard is started, everything finished stays stored, the manifest says ``stopped`` and lists the
stop under ``stops``, and ``RunStoppedError`` names the cause and the command that resumes the run.

Determinism: each sample's seed derives from (run seed, prompt id, sample index) and shards have a fixed
composition, so a run killed at any moment and resumed produces exactly the uninterrupted run's output.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._util.runlock import OutputLock
from .errors import FatalGenerationError, RunStoppedError, SpecMismatchError
from .executors import ExecutorConfig, Work, adopt, build_executor
from .executors.retry import retry_failed as retry_failed_samples
from .executors.shards import shards
from .metrics import run_metrics
from .metrics.failures import FailureSummary, failure_summary
from .prompts import PromptSet, load_prompts
from .registry import resolve
from .scoring import Scorer, build_scorer, check_languages
from .spec import EvalSpec
from .store import RunStore, now
from .store.reader import RunReader
from .types import Prompt

ProgressCallback = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class ExecutionReport:
    """What ``execute_run`` did: where the run lives, its metrics, the prompt bookkeeping, what it resumed,
    repaired and retried. ``polytox.evaluate`` wraps it in the read-only ``api.Run``."""

    path: Path
    spec: EvalSpec
    metrics: dict[str, Any]
    prompt_set: PromptSet
    resumed: bool
    shards_done_before: int
    failures: FailureSummary = dataclasses.field(default_factory=FailureSummary)
    retry: dict[str, Any] | None = None
    repairs: list[str] = dataclasses.field(default_factory=list)


def retry_command(out: str | Path) -> str:
    """The command that resumes a run and regenerates its failed samples (the spec comes from the manifest)."""
    return f"polytox eval --out {shlex.quote(str(out))} --retry-failed"


def resolve_spec(spec: EvalSpec, scorer: Scorer) -> EvalSpec:
    """Fill the spec's automatic fields so the stored spec is fully explicit.

    - batch size 0 -> the backend's default for K;
    - the built-in demo set without ``--lang`` -> only the languages the scorer covers.
    """
    gen = spec.generation
    if gen.batch_size == 0:
        backend: Any = resolve("generator", gen.backend)
        gen = dataclasses.replace(gen, batch_size=int(backend.default_batch_size(gen.samples)))
    prompts = spec.prompts
    if prompts.source in ("demo", "builtin:demo") and not prompts.langs and scorer.languages is not None:
        prompts = dataclasses.replace(prompts, langs=tuple(sorted(scorer.languages)))
    return dataclasses.replace(spec, generation=gen, prompts=prompts).validate()


def check_generation(spec: EvalSpec) -> None:
    """The backend's own checks (options, model name, server address) and the fluency model's name, before
    the run directory is opened: a wrong name or address is one clear error, not a failed run."""
    check = getattr(resolve("generator", spec.generation.backend), "check", None)  # plugins may have none
    if callable(check):
        check(spec.generation)
    if spec.fluency_model:
        from .models.lookup import check_model

        check_model(spec.fluency_model)


def execute_run(
    spec: EvalSpec,
    out: str | Path,
    progress: ProgressCallback | None = None,
    executor: ExecutorConfig | None = None,
    retry_failed: bool = False,
    generations_from: str | Path | None = None,
) -> ExecutionReport:
    """Run (or resume) an evaluation into ``out`` and return its metrics.

    ``executor`` chooses how shards run (default: pipelined, scoring overlapping generation); it is not
    part of the spec, so a run may be resumed with another executor. ``retry_failed``: after every shard
    is stored, regenerate the failed samples and rescore (recorded under the manifest's ``retries``).
    ``generations_from``: another run directory whose stored generations this run scores instead of
    generating them (same spec but for the scorer; ``executors.adopt``). Raises ``RunStoppedError`` when
    generation fails fatally. The run directory's lock is taken first: a second writer is refused at once,
    naming the holder, before anything loads.
    """
    with OutputLock(out):  # one writer per run directory (released, with a folder made only for it, at the end)
        return _execute(spec, out, progress, executor, retry_failed, generations_from)


def __getattr__(name: str) -> Any:
    """``RunResult``: the old name of ``ExecutionReport``, kept one release with a ``DeprecationWarning``."""
    old = {"RunResult": "ExecutionReport"}
    if name in old:
        import warnings

        warnings.warn(f"polytox.runner.{name} is deprecated; use {old[name]}", DeprecationWarning, stacklevel=2)
        return globals()[old[name]]
    raise AttributeError(f"module 'polytox.runner' has no attribute {name!r}")


def _execute(
    spec: EvalSpec,
    out: str | Path,
    progress: ProgressCallback | None,
    executor: ExecutorConfig | None,
    retry_failed: bool,
    generations_from: str | Path | None,
) -> ExecutionReport:
    report = progress or (lambda stage, done, total: None)
    scorer = build_scorer(spec.scorer.name, spec.scorer.options)
    auto_batch = spec.generation.batch_size == 0
    spec = resolve_spec(spec, scorer)
    prompt_set = load_prompts(spec.prompts, spec.seed)
    check_languages(scorer, {p.lang for p in prompt_set.prompts})
    plan = shards(prompt_set.prompts, spec.shard_size)
    store = RunStore(out)
    source = adopt.open_source(generations_from, spec) if generations_from is not None else None
    if source is not None:
        adopt.check_prompts(source, prompt_set.prompts)
    if source is None or retry_failed or adopt.available(source, store, len(plan)) < len(plan):
        check_generation(spec)  # something is generated here: the model must be there

    try:
        return _execute_locked(spec, store, scorer, prompt_set, plan, source, report, executor, retry_failed)
    except SpecMismatchError as exc:
        raise explain_automatic(exc, auto_batch) from exc


def explain_automatic(exc: SpecMismatchError, auto_batch: bool) -> SpecMismatchError:
    """A refused resume lists each differing field; say which of them polytox chose (``batch_size`` 0 is
    resolved from K, so a run with another K differs there too), so no line names a value the user never set."""
    if not auto_batch:
        return exc
    lines = [
        line + " (chosen automatically from samples: not set by you)"
        if line.strip().startswith("generation.batch_size:")
        else line
        for line in str(exc).split("\n")
    ]
    return SpecMismatchError("\n".join(lines))


def shard_sizes(plan: list[list[Prompt]], samples: int) -> list[tuple[int, set[str]]]:
    """Per shard: the rows each of its parts holds and its prompt ids (what ``RunStore`` checks)."""
    return [(len(shard) * samples, {p.id for p in shard}) for shard in plan]


def _execute_locked(
    spec: EvalSpec,
    store: RunStore,
    scorer: Scorer,
    prompt_set: PromptSet,
    plan: list[list[Prompt]],
    source: RunReader | None,
    report: ProgressCallback,
    executor: ExecutorConfig | None,
    retry_failed: bool,
) -> ExecutionReport:
    resumed = store.open(spec, extra={"scorer": scorer.describe()})
    repairs = store.remove_leftovers() + store.write_prompts(prompt_set.prompts)
    if resumed:
        repairs += store.remove_damaged(shard_sizes(plan, spec.generation.samples), scorer.id)
    store.update_manifest(
        n_records=prompt_set.n_records,
        n_bad_records=prompt_set.n_bad,
        bad_records=prompt_set.problems[:1000],
        selection_notes=prompt_set.notes,
    )
    if repairs:
        store.update_manifest(repairs=[*store.manifest().get("repairs", []), {"at": now(), "parts": repairs}])
    if source is not None:
        adopt.record(source, store, adopt.copy_generations(source, store, len(plan)))

    langs = {p.id: p.lang for p in prompt_set.prompts}
    done_before = sum(store.has_scores(scorer.id, i) for i in range(len(plan)))
    # Generate + score every unfinished shard; *how* (serial, pipelined, Ray) is the executor's business.
    work = Work(spec=spec, store=store, plan=plan, scorer=scorer, langs=langs, report=report)
    # validation has passed: the work (and a progress bar) starts, from the samples already scored
    report(
        "generate+score",
        sum(len(plan[i]) for i in range(len(plan)) if store.has_scores(scorer.id, i)) * spec.generation.samples,
        work.total,
    )
    retry: dict[str, Any] | None = None
    try:
        stats = build_executor(executor or ExecutorConfig()).run(work)
        store.update_manifest(executor=stats.to_dict())
        if retry_failed:
            retry = retry_failed_samples(work).to_dict()
            store.update_manifest(retries=[*store.manifest().get("retries", []), retry])
    except FatalGenerationError as exc:
        raise stopped(store, work, exc) from exc
    finally:
        scorer.close()

    metrics = run_metrics(str(store.path), scorer.id, spec.metrics, seed=spec.seed)
    metrics = {"model": spec.generation.model, "backend": spec.generation.backend, **metrics}
    if scorer.describe().get("scale"):  # the scale the values are on (polytox-ml, default): tables name it
        metrics["scale"] = scorer.describe()["scale"]
    from .detox.run_metrics import detox_metrics  # detox method, distinct-n, fluency (--fluency-model)

    metrics.update(detox_metrics(store, spec, prompt_set.prompts, len(plan)))
    if spec.prompts.unprompted:  # RTP §3.1: bootstrap expected max toxicity of n <= N generations
        from .metrics.unprompted import unprompted_report

        metrics["unprompted"] = unprompted_report(
            store, scorer.id, spec.metrics.n_bootstrap, spec.metrics.ci_level, spec.seed
        )
    store.write_metrics(metrics)
    failures = failure_summary(store, scorer.id)
    store.update_manifest(status="complete", finished_at=now(), failures=failures.to_dict())
    return ExecutionReport(
        path=store.path,
        spec=spec,
        metrics=metrics,
        prompt_set=prompt_set,
        resumed=resumed,
        shards_done_before=done_before,
        failures=failures,
        retry=retry,
        repairs=repairs,
    )


def stopped(store: RunStore, work: Work, exc: FatalGenerationError) -> RunStoppedError:
    """Record a fatal stop in the manifest; the error names the cause, what is stored, and how to resume."""
    cause = " ".join(str(exc).split())  # one line
    done = sum(store.has_scores(work.scorer.id, i) for i in range(len(work.plan)))
    stops = [*store.manifest().get("stops", []), {"at": now(), "cause": cause, "shards_stored": done}]
    store.update_manifest(status="stopped", stops=stops)
    return RunStoppedError(
        f"generation stopped: {cause}; {done} of {len(work.plan)} shard(s) are stored in "
        f"{store.path}; resume with: {retry_command(store.path)}"
    )
