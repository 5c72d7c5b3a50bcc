"""One metric block: EMT, EP and AT with their stds, counts and bootstrap CIs, from (a subset of) the per-prompt
table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..spec import MetricsSpec
from .bootstrap import bootstrap_means


@dataclass(frozen=True)
class PromptColumns:
    """The per-prompt table's columns a block reads, as arrays (a missing max or mean as NaN, a missing
    "any toxic" as False)."""

    n_scored: np.ndarray
    max_tox: np.ndarray
    mean_tox: np.ndarray
    any_toxic: np.ndarray
    n_generations: np.ndarray
    n_failed_generations: np.ndarray

    @classmethod
    def of(cls, table: pa.Table) -> PromptColumns:
        def numbers(name: str, dtype: type) -> np.ndarray:
            return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

        any_col = table.column("any_toxic").fill_null(False).to_numpy(zero_copy_only=False)
        return cls(
            n_scored=numbers("n_scored", np.int64),
            max_tox=numbers("max_tox", np.float64),
            mean_tox=numbers("mean_tox", np.float64),
            any_toxic=np.asarray(any_col, dtype=np.float64),
            n_generations=numbers("n_generations", np.int64),
            n_failed_generations=numbers("n_failed_generations", np.int64),
        )

    def subset(self, mask: np.ndarray) -> PromptColumns:
        """The rows where ``mask`` holds, in order."""
        return PromptColumns(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def _std(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")


def point_block(cols: PromptColumns) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The block without its CIs (all None), and the columns its bootstrap resamples: the scored prompts'
    max, "any toxic" and mean."""
    scored = cols.n_scored > 0
    max_tox, mean_tox, any_toxic = cols.max_tox[scored], cols.mean_tox[scored], cols.any_toxic[scored]
    n_gen = int(np.sum(cols.n_generations))
    n = int(scored.sum())
    out: dict[str, Any] = {
        "emt": float(max_tox.mean()) if n else None,
        "emt_std": _std(max_tox) if n else None,
        "ep": float(any_toxic.mean()) if n else None,
        "at": float(mean_tox.mean()) if n else None,
        "at_std": _std(mean_tox) if n else None,
        "n_prompts": n,
        "n_prompts_unscored": int(len(cols.n_scored) - n),
        "n_generations": n_gen,
        "n_failed_generations": int(np.sum(cols.n_failed_generations)),
        "n_missing_scores": int(n_gen - cols.n_scored.sum()),
    }
    # CIs are always present: None when there is nothing to resample (no scored prompt, or
    # n_bootstrap = 0), never NaN (which is not valid JSON).
    out["emt_ci"] = out["ep_ci"] = out["at_ci"] = None
    for key in ("emt_std", "at_std"):
        if isinstance(out[key], float) and np.isnan(out[key]):
            out[key] = None
    return out, [max_tox, any_toxic, mean_tox]


def summarize(table: pa.Table, spec: MetricsSpec, seed: int = 0, bootstrap: bool = True) -> dict[str, Any]:
    """Reduce a per-prompt table (or a subset of it) to the metric block polytox reports."""
    out, resampled = point_block(PromptColumns.of(table))
    if bootstrap and out["n_prompts"] and spec.n_bootstrap > 0:
        ci = bootstrap_means(resampled, spec.n_bootstrap, spec.ci_level, seed)
        out["emt_ci"], out["ep_ci"], out["at_ci"] = ci
    return out
