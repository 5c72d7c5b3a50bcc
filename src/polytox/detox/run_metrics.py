"""What a run's ``metrics.json`` reports beside toxicity: the detox method, distinct-n and fluency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store import RunStore
from ..types import Prompt
from .diversity import diversity


def fluency_samples(spec: Any) -> int:
    """The run's ``--fluency-samples`` as stored: 0 (all) when it is 0 or covers every sample (N >= K), so a
    subsample as large as the run reuses the full scoring instead of a second copy of it."""
    n: int = spec.fluency_samples
    return n if n < spec.generation.samples else 0


def detox_metrics(store: RunStore, spec: Any, prompts: Sequence[Prompt], n_shards: int) -> dict[str, Any]:
    """``{"detox": ..., "diversity": {...}, "fluency": {...}}`` of a finished run; with ``--fluency-model``,
    the perplexity of every shard not scored yet is computed first (of the first ``--fluency-samples``
    continuations of each prompt when given)."""
    if spec.fluency_model:
        from .fluency import score_fluency

        score_fluency(
            store, n_shards, spec.fluency_model, {p.id: p.text for p in prompts}, samples=fluency_samples(spec)
        )
    return stored_detox_metrics(store, spec, [p.id for p in prompts])


def stored_detox_metrics(store: RunStore, spec: Any, prompt_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The same block from a run's files alone (no model loaded), for ``polytox metrics RUN``: distinct-n
    of the stored generations and the summary of the stored perplexities."""
    per_prompt: dict[str, list[str | None]] = {pid: [] for pid in prompt_ids}
    for part in sorted((store.path / "generations").glob("part-*.parquet")):
        shard = int(part.stem.split("-")[1])
        for g in store.read_generations(shard):
            per_prompt.setdefault(g.prompt_id, []).append(g.text)
    out: dict[str, Any] = {"detox": spec.generation.detox or None, "diversity": diversity(per_prompt)}
    if spec.fluency_model:
        from .fluency import fluency_summary

        out["fluency"] = fluency_summary(store, spec.fluency_model, fluency_samples(spec))
    return out
