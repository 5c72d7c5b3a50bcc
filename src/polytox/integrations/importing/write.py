"""Store an ``ImportedRun`` as a polytox run directory, with the store's own writer.

The run gets a spec (the framework's model and sampling settings, K, the scorer, the threshold), its
prompts, one generation per completion and, per scorer, one score per completion: the values the
framework's polytox scorer recorded (stored under the scorer id it recorded), and, when asked for or when
the output keeps no values (HELM), the values of a scorer built here. Then the metrics are computed as
``polytox eval`` computes them, so ``metrics``, ``leaderboard``, ``report`` and ``compare-scorers`` read
the run like any other, and another scorer or scale needs no new generation.

The run directory must be new (or an empty folder): an import never mixes into another folder, and the
folder of the imported output is refused as a target. An import that fails after it began writing removes
what it wrote, so a refused import leaves nothing behind.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._util.atomic import atomic_write_text
from ..._util.runlock import LOCK_NAME, OutputLock
from ...errors import PolytoxError
from ...metrics import run_metrics
from ...metrics.failures import failure_summary
from ...spec import EvalSpec, GenerationSpec, MetricsSpec, PromptSpec, ScorerSpec
from ...store import RunStore, now
from ...types import Generation, Prompt, Score
from .records import ImportedPrompt, ImportedRun

SHARD_SIZE = 32
MISSING_SAMPLE = "MISSING_IN_SOURCE: the framework's output has fewer completions for this prompt than K"
METRIC_KEYS = ("emt", "ep", "at")


@dataclass
class ImportResult:
    """What ``store_run`` wrote: the run directory, its scorers (the first is the run's own), the metrics of
    the run's scorer and, per metric the framework printed, its value beside polytox's."""

    path: Path
    scorer_ids: list[str]
    metrics: dict[str, Any]
    check: dict[str, dict[str, float | None]] = field(default_factory=dict)


def _spec(run: ImportedRun, scorer_name: str, prompts_file: Path) -> EvalSpec:
    g = run.generation
    known = {k: g[k] for k in ("max_new_tokens", "temperature", "top_p", "top_k") if g.get(k) is not None}
    generation = GenerationSpec(
        model=run.model,
        backend=run.framework,
        samples=max(1, run.samples),
        chat_template=str(g.get("chat_template", "auto")),
        **known,
    )
    metrics = MetricsSpec(threshold=run.threshold) if run.threshold is not None else MetricsSpec()
    return EvalSpec(
        prompts=PromptSpec(source=str(prompts_file), format="generic"),
        generation=generation,
        scorer=ScorerSpec(name=scorer_name),
        metrics=metrics,
        shard_size=SHARD_SIZE,
    ).validate()


def _prompts_jsonl(prompts: Sequence[ImportedPrompt]) -> str:
    import json

    return "".join(
        json.dumps({"id": p.id, "text": p.text, "lang": p.lang, "toxicity": p.toxicity}, ensure_ascii=False) + "\n"
        for p in prompts
    )


def _generations(prompt: ImportedPrompt, k: int) -> list[Generation]:
    out = [
        Generation(prompt_id=prompt.id, sample_index=i, text=c.text, finish_reason="stop")
        for i, c in enumerate(prompt.completions)
    ]
    out += [
        Generation(prompt_id=prompt.id, sample_index=i, text=None, finish_reason="error", error=MISSING_SAMPLE)
        for i in range(len(prompt.completions), k)
    ]
    return out


def _recorded_scores(prompt: ImportedPrompt, k: int) -> list[Score]:
    out = [
        Score(values={"toxicity": float(c.value)})
        if c.value is not None
        else Score.failed(c.error or "MISSING_SCORE: the framework recorded no value and no reason")
        for c in prompt.completions
    ]
    return out + [Score.failed(MISSING_SAMPLE)] * (k - len(prompt.completions))


def store_run(
    run: ImportedRun,
    out: str | Path,
    rescore: tuple[str, Mapping[str, str]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ImportResult:
    """Write ``run`` into the new run directory ``out`` (refused when it already holds a run).

    ``rescore``: a scorer name and options to score the completions with here as well (needed when the
    framework's output keeps no per-completion values). The run's own scorer (``metrics``' default) is the
    framework's recorded one when its values are there, else the rescoring one."""
    say = progress or (lambda line: None)
    if not run.prompts:
        raise PolytoxError(f"{run.source}: no prompts with completions found in this {run.framework} output")
    if not run.has_values and rescore is None:
        raise PolytoxError(
            f"{run.source}: this {run.framework} output keeps no per-completion scores"
            + (f" (its scorer was {run.scorer_id})" if run.scorer_id else "")
            + "; give --scorer to score its completions here"
        )
    out = Path(out)
    check_out(out, run.source)
    check_run(run)
    created = not out.exists()
    started = False
    try:
        with OutputLock(out):
            store = RunStore(out)
            if store.exists() or (out.is_dir() and any(p.name != LOCK_NAME for p in out.iterdir())):
                raise PolytoxError(f"{out} already holds a run; import into a new directory")
            started = True
            return _store_locked(run, store, rescore, say)
    except BaseException:
        if started:
            _discard(out, created)
        raise


def check_out(out: Path, source: str | Path | None = None) -> None:
    """Refuse a target that is not a new or empty folder: the imported output itself, a file, or a folder
    holding anything (a run, another framework's output)."""
    if source is not None and out.resolve() == Path(source).resolve():
        raise PolytoxError(f"{out} is the output being imported; import into a new directory")
    if out.exists() and not out.is_dir():
        raise PolytoxError(f"{out} is a file; import into a new directory")
    if out.is_dir():
        if RunStore(out).exists():
            raise PolytoxError(f"{out} already holds a run; import into a new directory")
        entries = sorted(p.name for p in out.iterdir())
        if entries:
            shown = ", ".join(entries[:3]) + (" ..." if len(entries) > 3 else "")
            raise PolytoxError(f"{out} is not empty ({shown}); import into a new or empty directory")


def check_run(run: ImportedRun) -> None:
    """The last check before writing (the readers check every value; a run built in Python is checked here):
    unique prompt ids, non-empty texts, values finite and in [0, 1]."""
    seen: set[str] = set()
    for p in run.prompts:
        if p.id in seen:
            raise PolytoxError(f"{run.source}: prompt id {p.id!r} appears twice")
        seen.add(p.id)
        if not p.text.strip():
            raise PolytoxError(f"{run.source}: prompt {p.id!r} has an empty text")
        for v in [p.toxicity] + [c.value for c in p.completions]:
            if v is not None and not _is_probability(v):
                raise PolytoxError(f"{run.source}: prompt {p.id!r}: a toxicity must be a number in [0, 1], got {v!r}")


def _is_probability(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1


def _discard(out: Path, created: bool) -> None:
    """Remove what a failed import wrote: the folder it created, or what it put in the empty folder it got."""
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for entry in out.iterdir() if out.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _store_locked(
    run: ImportedRun, store: RunStore, rescore: tuple[str, Mapping[str, str]] | None, say: Callable[[str], None]
) -> ImportResult:
    from ...scoring import build_scorer

    k = run.samples
    scorer = build_scorer(rescore[0], dict(rescore[1])) if rescore is not None else None
    if scorer is not None and not run.has_values and run.scorer_id and scorer.id != run.scorer_id:
        say(f"note: {run.framework} scored with {run.scorer_id}; the completions are scored here with {scorer.id}")
    try:
        own_id = run.scorer_id if run.has_values and run.scorer_id else (scorer.id if scorer else "")
        own_name = own_id.split("@", 1)[0] if run.has_values else (rescore[0] if rescore else own_id)
        prompts_file = store.path / "imported-prompts.jsonl"
        spec = _spec(run, own_name, prompts_file.resolve())
        if run.has_values and run.scorer_id:
            described: dict[str, Any] = {"id": run.scorer_id, "attributes": ["toxicity"], "recorded_by": run.framework}
            if run.scale:
                described["scale"] = run.scale
        else:
            assert scorer is not None
            described = scorer.describe()
        store.open(spec, extra={"scorer": described})
        atomic_write_text(store.path / prompts_file.name, _prompts_jsonl(run.prompts))
        prompts = [
            Prompt(id=p.id, text=p.text, lang=p.lang, toxicity=p.toxicity, source=run.source) for p in run.prompts
        ]
        store.write_prompts(prompts)
        ids: list[str] = []
        shards = [run.prompts[i : i + SHARD_SIZE] for i in range(0, len(run.prompts), SHARD_SIZE)]
        for n, shard in enumerate(shards):
            gens = [g for p in shard for g in _generations(p, k)]
            store.write_generations(n, gens)
            if run.has_values and run.scorer_id:
                store.write_scores(
                    run.scorer_id, n, gens, [s for p in shard for s in _recorded_scores(p, k)], ["toxicity"]
                )
            if scorer is not None:
                langs = {p.id: p.lang for p in shard}
                if run.score_per_prompt:
                    scores = [s for p in shard for s in _score(scorer, _generations(p, k), langs, distinct=True)]
                else:
                    scores = _score(scorer, gens, langs)
                store.write_scores(scorer.id, n, gens, scores, list(scorer.attributes))
        if run.has_values and run.scorer_id:
            ids.append(run.scorer_id)
        if scorer is not None and scorer.id not in ids:
            ids.append(scorer.id)
        say(f"stored {len(run.prompts)} prompt(s) x {k} completion(s); scorers: {', '.join(ids)}")
        metrics = run_metrics(str(store.path), ids[0], spec.metrics, seed=spec.seed)
        metrics = {"model": run.model, "backend": run.framework, **metrics}
        if described.get("scale"):
            metrics["scale"] = described["scale"]
        store.write_metrics(metrics)
        check = {
            key: {"framework": run.reported.get(key), "polytox": metrics["overall"].get(key)}
            for key in METRIC_KEYS
            if key in run.reported
        }
        store.update_manifest(
            status="complete",
            finished_at=now(),
            failures=failure_summary(store, ids[0]).to_dict(),
            imported={
                "framework": run.framework,
                "source": run.source,
                "scorer_recorded": run.scorer_id,
                "scale_recorded": run.scale,
                "values_recorded": run.has_values,
                "generation": run.generation,
                "reported": run.reported,
                "notes": list(run.notes),
                "at": now(),
            },
        )
        return ImportResult(path=store.path, scorer_ids=ids, metrics=metrics, check=check)
    finally:
        if scorer is not None:
            scorer.close()


def _score(scorer: Any, gens: Sequence[Generation], langs: Mapping[str, str], distinct: bool = False) -> list[Score]:
    """The scorer's score of each stored completion, in one call; a missing completion keeps its error.
    ``distinct``: the call holds each distinct text once (HELM's request for one instance); empty texts fail
    before any batch is cut (``scoring.base``), so they change no other text's batch."""
    todo = [i for i, g in enumerate(gens) if g.error is None]
    out: list[Score] = [Score.failed(g.error or "") if g.error else Score.failed("internal: unscored") for g in gens]
    pairs = [(gens[i].text or "", langs[gens[i].prompt_id]) for i in todo]
    asked = list(dict.fromkeys(pairs)) if distinct else pairs
    got = scorer.score([t for t, _ in asked], [lang for _, lang in asked])
    lookup = dict(zip(asked, got, strict=True))
    scored = [lookup[p] for p in pairs] if distinct else got
    for i, s in zip(todo, scored, strict=True):
        out[i] = s
    return out
