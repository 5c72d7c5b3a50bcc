"""Prompt selection: language filter, seeded stratified sample by toxicity bucket, limit.

Order is always the source order, so ``--limit N`` takes a prefix and ids stay comparable across runs.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..spec import PromptSpec
from ..types import Prompt


def select_prompts(prompts: list[Prompt], spec: PromptSpec, seed: int) -> tuple[list[Prompt], list[str]]:
    """Apply ``langs``, then ``per_bucket`` (seeded), then ``limit``; return prompts and notes."""
    notes: list[str] = []
    if spec.langs:
        wanted = set(spec.langs)
        prompts = [p for p in prompts if p.lang in wanted]
    if spec.per_bucket:
        by_bucket: dict[int, list[int]] = defaultdict(list)
        unbucketed = 0
        for i, p in enumerate(prompts):
            if p.bucket is None:
                unbucketed += 1
            else:
                by_bucket[p.bucket].append(i)
        if unbucketed:
            notes.append(f"{unbucketed} prompt(s) without a toxicity score left out of the stratified sample")
        rng = np.random.default_rng(seed)
        keep: list[int] = []
        for bucket in range(4):
            idx = by_bucket.get(bucket, [])
            if len(idx) < spec.per_bucket:
                notes.append(f"bucket {bucket}: only {len(idx)} prompt(s) for {spec.per_bucket} requested")
                keep.extend(idx)
            else:
                keep.extend(int(i) for i in rng.choice(idx, size=spec.per_bucket, replace=False))
        prompts = [prompts[i] for i in sorted(keep)]
    if spec.limit is not None:
        prompts = prompts[: spec.limit]
    return prompts, notes
