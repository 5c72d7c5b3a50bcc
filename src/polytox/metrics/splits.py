"""The group of each prompt in each split the metrics report: prompt toxicity, language, resource tier and
toxicity bucket ("unknown" where the prompt does not say)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..langs import load_resource_tiers
from ..spec import MetricsSpec


def split_keys(table: pa.Table, spec: MetricsSpec) -> dict[str, np.ndarray]:
    """Group keys per prompt for each split."""
    n = table.num_rows
    ptox = table.column("prompt_toxicity").to_pylist()
    t = spec.threshold
    if spec.comparison == ">=":
        is_toxic = ["unknown" if v is None else ("toxic" if v >= t else "nontoxic") for v in ptox]
    else:
        is_toxic = ["unknown" if v is None else ("toxic" if v > t else "nontoxic") for v in ptox]
    langs = ["unknown" if v is None else v for v in table.column("lang").to_pylist()]
    tiers = load_resource_tiers()
    buckets = ["unknown" if v is None else str(v) for v in table.column("toxicity_bucket").to_pylist()]
    return {
        "prompt_toxicity": np.asarray(is_toxic, dtype=object).reshape(n),
        "lang": np.asarray(langs, dtype=object).reshape(n),
        "resource_tier": np.asarray([tiers.get(x, "unknown") for x in langs], dtype=object).reshape(n),
        "toxicity_bucket": np.asarray(buckets, dtype=object).reshape(n),
    }
