"""What a run's ``metrics.json`` reports beside toxicity: the detox method, distinct-n and fluency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store.reader import RunReader
from ..types import Prompt
from .text_stats import text_stats


def fluency_samples(spec: Any) -> int:
    """The run's ``--fluency-samples`` as stored: 0 (all) when it is 0 or covers every sample (N >= K), so a
    subsample as large as the run reuses the full scoring instead of a second copy of it."""
    n: int = spec.fluency_samples
    return n if n < spec.generation.samples else 0


def detox_metrics(store: RunReader, spec: Any, prompts: Sequence[Prompt], n_shards: int) -> dict[str, Any]:
    """``{"detox": ..., "diversity": {...}, "fluency": {...}}`` of a finished run; with ``--fluency-model``,
    the perplexity of every shard not scored yet is computed first (of the first ``--fluency-samples``
    continuations of each prompt when given)."""
    if spec.fluency_model:
        from .fluency import score_fluency

        score_fluency(
            store, n_shards, spec.fluency_model, {p.id: p.text for p in prompts}, samples=fluency_samples(spec)
        )
    return stored_detox_metrics(store, spec)


def stored_detox_metrics(store: RunReader, spec: Any) -> dict[str, Any]:
    """The same block from a run's files alone (no model loaded), for ``polytox metrics RUN``: distinct-n
    of the stored generations (computed once and kept with the checksums of the parts it came from,
    ``text_stats``) and the summary of the stored perplexities."""
    out: dict[str, Any] = {"detox": spec.generation.detox or None, "diversity": text_stats(store)["diversity"]}
    if spec.fluency_model:
        from .fluency import fluency_summary

        out["fluency"] = fluency_summary(store, spec.fluency_model, fluency_samples(spec))
    return out
