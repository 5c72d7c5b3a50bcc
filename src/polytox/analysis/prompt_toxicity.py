"""Prompt toxicity vs continuation toxicity (PTP §4.5 and Appendix B).

At the granularity of single continuations ("without aggregating as in AVERAGE TOXICITY"): Pearson r
between each continuation's score and its prompt's own toxicity, overall, per model category, per model
and per language, each also split into low- and high-toxicity prompts (prompt toxicity below / at or
above the toxic threshold, PTP's "low-toxicity prompts" vs "high-toxicity prompts").

The prompt's toxicity is the value its source ships (RTP/PTP: Perspective; RTP-LX: the human rating
mapped to [0, 1]); the continuation's is the selected scorer's. Continuations without a score and
prompts without a toxicity value are left out and counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .common import generations_table
from .groups import split, values
from .options import AnalysisOptions
from .result import AnalysisResult, Table
from .run_collection import RunCollection
from .stats import SMALL_SAMPLE, pearson


def _rows(label: str, group: str, x: np.ndarray, y: np.ndarray, threshold: float, comparison: str) -> list[list[Any]]:
    high = x >= threshold if comparison == ">=" else x > threshold
    out = []
    for subset, mask in (
        ("all", np.ones(len(x), dtype=bool)),
        ("low-toxicity prompts", ~high),
        ("high-toxicity prompts", high),
    ):
        c = pearson(x[mask], y[mask])
        out.append(
            [
                label,
                group,
                subset,
                int(mask.sum()),
                c.r if c else None,
                c.p if c else None,
                "small sample" if int(mask.sum()) < SMALL_SAMPLE else "",
            ]
        )
    return out


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    res = AnalysisResult(
        key="prompt_toxicity",
        title="Prompt toxicity vs continuation toxicity",
        reference="PTP §4.5 and Appendix B (Pearson r)",
        notes=opts.describe(),
    )
    table, notes = generations_table(collection, opts)
    res.notes += notes
    score = values(table, "score")
    ptox = values(table, "prompt_toxicity")
    n_unscored = int(np.isnan(score).sum())
    n_no_ptox = int((np.isnan(ptox) & ~np.isnan(score)).sum())
    if n_unscored:
        res.notes.append(f"{n_unscored} continuation(s) without a score left out")
    if n_no_ptox:
        res.notes.append(f"{n_no_ptox} scored continuation(s) whose prompt has no toxicity value left out")
    table = table.filter(pa.array(~np.isnan(score) & ~np.isnan(ptox)))
    spec = collection.metrics
    rows: list[list[Any]] = []
    x, y = values(table, "prompt_toxicity"), values(table, "score")
    rows += _rows("overall", "all", x, y, spec.threshold, spec.comparison)
    for column, label in (
        ("category", "category"),
        ("model", "model"),
        ("family", "family"),
        ("lang", "language"),
    ):
        for (key,), sub in split(table, [column]).items():
            if key is None:
                continue
            rows += _rows(
                label,
                str(key),
                values(sub, "prompt_toxicity"),
                values(sub, "score"),
                spec.threshold,
                spec.comparison,
            )
    res.tables.append(
        Table.build(
            "correlations",
            "Pearson r between prompt toxicity and continuation toxicity",
            ["by", "group", "prompt subset", "continuations", "r", "p", "flag"],
            rows,
            caption=f"one point per continuation; high-toxicity prompt = prompt toxicity {spec.comparison} "
            f"{spec.threshold}; r undefined (–) below 3 points or without variance",
        )
    )
    if len(x) > 50_000:  # the plot needs a sample, not millions of points
        idx = np.random.default_rng(0).choice(len(x), 50_000, replace=False)
        px, py = x[idx], y[idx]
    else:
        px, py = x, y
    overall = pearson(x, y)
    res.data = {"x": px.tolist(), "y": py.tolist(), "r": overall.r if overall else None, "n": len(x)}
    return res
