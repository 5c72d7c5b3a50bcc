"""The full metrics of a per-prompt table: the overall block and one block per group of every split."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from ..spec import MetricsSpec
from .splits import split_keys
from .summary import summarize


def compute(
    table: pa.Table,
    spec: MetricsSpec,
    seed: int = 0,
    extra: Mapping[str, Any] | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Overall metrics and every split, from a per-prompt table.

    Each block (overall, and every group of every split) is independent, with its own seeded bootstrap,
    so the blocks are computed on a small thread pool (NumPy releases the GIL in the gathers and
    reductions that dominate); the result does not depend on ``workers``.
    """
    jobs: list[tuple[str | None, str, pa.Table]] = [(None, "overall", table)]
    for split, keys in split_keys(table, spec).items():
        for value in sorted(set(keys.tolist())):
            jobs.append((split, value, table.filter(pa.array(keys == value))))
    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    if n_workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            blocks = list(pool.map(lambda job: summarize(job[2], spec, seed), jobs))
    else:
        blocks = [summarize(job[2], spec, seed) for job in jobs]
    result: dict[str, Any] = {
        "settings": {
            "threshold": spec.threshold,
            "comparison": spec.comparison,
            "n_bootstrap": spec.n_bootstrap,
            "ci_level": spec.ci_level,
            "bootstrap_seed": seed,
            "std_ddof": 1,
        },
        **(dict(extra) if extra else {}),
        "overall": blocks[0],
        "by": {},
    }
    for (split_name, value, _), block in zip(jobs[1:], blocks[1:], strict=True):
        result["by"].setdefault(split_name, {})[value] = block
    return result
