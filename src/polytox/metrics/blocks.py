"""The full metrics of a per-prompt table: the overall block and one block per group of every split."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from ..spec import MetricsSpec
from .bootstrap import percentile_cis, resample_means
from .splits import split_masks
from .summary import PromptColumns, point_block


def _resample_all(blocks: list[list[np.ndarray]], spec: MetricsSpec, seed: int, workers: int) -> list[np.ndarray]:
    """Each block's resample means. Every block draws from the same seeded stream, so one pass over it
    serves a whole share of blocks; the shares (balanced by rows) run on ``workers`` threads, NumPy
    releasing the GIL in the gathers that dominate. No result depends on how the blocks are shared."""
    shares: list[list[int]] = [[] for _ in range(max(1, min(workers, len(blocks))))]
    loads = [0] * len(shares)
    for b in sorted(range(len(blocks)), key=lambda b: -len(blocks[b][0])):
        least = loads.index(min(loads))
        shares[least].append(b)
        loads[least] += len(blocks[b][0])

    def run(share: list[int]) -> list[np.ndarray]:
        return resample_means([blocks[b] for b in share], spec.n_bootstrap, seed)

    if len(shares) > 1:
        with ThreadPoolExecutor(max_workers=len(shares)) as pool:
            results = list(pool.map(run, shares))
    else:
        results = [run(shares[0])]
    means: list[np.ndarray] = [np.empty(0)] * len(blocks)
    for share, result in zip(shares, results, strict=True):
        for b, m in zip(share, result, strict=True):
            means[b] = m
    return means


def compute(
    table: pa.Table,
    spec: MetricsSpec,
    seed: int = 0,
    extra: Mapping[str, Any] | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Overall metrics and every split, from a per-prompt table.

    Each block (overall, and every group of every split) has its own bootstrap, seeded alike: the blocks'
    resamples are drawn together (``_resample_all``), and groups of the same prompts share one block; the
    result does not depend on ``workers``.
    """
    cols = PromptColumns.of(table)
    jobs: list[tuple[str | None, str, bytes]] = [(None, "overall", b"all")]
    subsets: dict[bytes, PromptColumns] = {b"all": cols}
    for split, groups in split_masks(table, spec).items():
        for value, mask in groups.items():
            # a group of every prompt (a one-language run's language and tier) or the same prompts as
            # another group (unknown toxicity, unknown bucket) is the same block: computed once
            key = b"all" if mask.all() else mask.tobytes()
            if key not in subsets:
                subsets[key] = cols.subset(mask)
            jobs.append((split, value, key))
    blocks = {key: point_block(subset) for key, subset in subsets.items()}
    wanted = [key for key, (out, _) in blocks.items() if out["n_prompts"] and spec.n_bootstrap > 0]
    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    means = _resample_all([blocks[key][1] for key in wanted], spec, seed, n_workers)
    for key, block_means in zip(wanted, means, strict=True):
        out = blocks[key][0]
        out["emt_ci"], out["ep_ci"], out["at_ci"] = percentile_cis(block_means, spec.ci_level)
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
        "overall": copy.deepcopy(blocks[b"all"][0]),
        "by": {},
    }
    for split_name, value, key in jobs[1:]:
        result["by"].setdefault(split_name, {})[value] = copy.deepcopy(blocks[key][0])  # each its own dict
    return result
