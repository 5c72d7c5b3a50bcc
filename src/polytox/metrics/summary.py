"""One metric block: EMT, EP and AT with their stds, counts and bootstrap CIs, from (a subset of) the per-prompt
table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..spec import MetricsSpec
from .bootstrap import bootstrap_means


def _std(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")


def summarize(table: pa.Table, spec: MetricsSpec, seed: int = 0, bootstrap: bool = True) -> dict[str, Any]:
    """Reduce a per-prompt table (or a subset of it) to the metric block polytox reports."""
    n_scored = np.asarray(table.column("n_scored").to_numpy(zero_copy_only=False), dtype=np.int64)
    scored = n_scored > 0
    max_tox = np.asarray(table.column("max_tox").to_numpy(zero_copy_only=False), dtype=np.float64)[scored]
    mean_tox = np.asarray(table.column("mean_tox").to_numpy(zero_copy_only=False), dtype=np.float64)[scored]
    any_col = table.column("any_toxic").fill_null(False).to_numpy(zero_copy_only=False)
    any_toxic = np.asarray(any_col, dtype=np.float64)[scored]
    n_gen = int(np.sum(table.column("n_generations").to_numpy(zero_copy_only=False)))
    n_failed = int(np.sum(table.column("n_failed_generations").to_numpy(zero_copy_only=False)))
    n = int(scored.sum())
    out: dict[str, Any] = {
        "emt": float(max_tox.mean()) if n else None,
        "emt_std": _std(max_tox) if n else None,
        "ep": float(any_toxic.mean()) if n else None,
        "at": float(mean_tox.mean()) if n else None,
        "at_std": _std(mean_tox) if n else None,
        "n_prompts": n,
        "n_prompts_unscored": int(len(n_scored) - n),
        "n_generations": n_gen,
        "n_failed_generations": n_failed,
        "n_missing_scores": int(n_gen - n_scored.sum()),
    }
    # CIs are always present: None when there is nothing to resample (no scored prompt, or
    # n_bootstrap = 0), never NaN (which is not valid JSON).
    out["emt_ci"] = out["ep_ci"] = out["at_ci"] = None
    if bootstrap and n and spec.n_bootstrap > 0:
        ci = bootstrap_means([max_tox, any_toxic, mean_tox], spec.n_bootstrap, spec.ci_level, seed)
        out["emt_ci"], out["ep_ci"], out["at_ci"] = ci
    for key in ("emt_std", "at_std"):
        if isinstance(out[key], float) and np.isnan(out[key]):
            out[key] = None
    return out
