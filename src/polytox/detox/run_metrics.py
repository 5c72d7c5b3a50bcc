"""What a run's ``metrics.json`` reports beside toxicity: the detox method, distinct-n and fluency."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store import RunStore
from ..types import Prompt
from .diversity import diversity


def detox_metrics(store: RunStore, spec: Any, prompts: Sequence[Prompt], n_shards: int) -> dict[str, Any]:
    """``{"detox": ..., "diversity": {...}, "fluency": {...}}`` of a finished run (fluency with --fluency-model)."""
    per_prompt: dict[str, list[str | None]] = {p.id: [] for p in prompts}
    for shard in range(n_shards):
        if store.has_generations(shard):
            for g in store.read_generations(shard):
                per_prompt.setdefault(g.prompt_id, []).append(g.text)
    out: dict[str, Any] = {"detox": spec.generation.detox or None, "diversity": diversity(per_prompt)}
    if spec.fluency_model:
        from .fluency import fluency_summary, score_fluency

        score_fluency(store, n_shards, spec.fluency_model, {p.id: p.text for p in prompts})
        out["fluency"] = fluency_summary(store, spec.fluency_model)
    return out
