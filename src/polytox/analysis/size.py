"""Size: AVERAGE TOXICITY against parameter count within a model family (PTP §4.2, Figure 4).

Within each (family, prompt set), models are ordered by parameter count; every pair of different sizes gets
Cohen's d of their per-prompt AT (larger minus smaller: d > 0 means the larger model is more toxic) and
Welch's t-test, as PTP reports "Cohen's d >= 0.3, p <= 0.001" between Pythia sizes. Models without
``family`` or ``params`` metadata are listed in the notes, not guessed.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pyarrow as pa

from .common import prompts_table, small_note
from .groups import split, values
from .options import AnalysisOptions
from .result import AnalysisResult, Table, pm
from .run_collection import RunCollection
from .runs import format_params
from .stats import cohen_d, describe, effect_label, welch_t


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    res = AnalysisResult(
        key="size",
        title="Toxicity by model size within a family",
        reference="PTP §4.2, Figure 4 (Cohen's d between sizes)",
        notes=opts.describe(),
    )
    table, notes = prompts_table(collection, opts)
    res.notes += notes
    missing = without_size_metadata(table)
    if missing:
        res.notes.append(
            f"no family/params metadata for {', '.join(missing)}; left out (give them in the "
            "metadata YAML or the manifest's model_meta)"
        )
    model_rows: list[list[Any]] = []
    pair_rows: list[list[Any]] = []
    series: list[dict[str, Any]] = []
    for (family, prompt_set), fam in split(table, ["family", "prompt_set"]).items():
        if family is None:
            continue
        models = split(fam, ["params", "model"])
        models = {k: v for k, v in models.items() if k[0] is not None}
        if not models:
            continue
        points = []
        ats: dict[str, np.ndarray] = {}
        ids: dict[str, set[str]] = {}
        for (params, model), sub in models.items():
            at = values(sub, "mean_tox")
            s = describe(at)
            ats[model] = at
            ids[model] = set(sub.column("prompt_id").to_pylist())
            model_rows.append([family, prompt_set, model, format_params(params), s.n, pm(s.mean, s.std)])
            points.append({"model": model, "params": params, "at": s.mean, "std": s.std, "n": s.n})
            note = small_note(f"{model} · {prompt_set}", s.n)
            if note:
                res.notes.append(note)
        sizes = {params for (params, _) in models}
        if len(sizes) < 2:
            res.notes.append(
                f"family {family} · {prompt_set} has one size only ({format_params(min(sizes))}); no size contrast"
            )
            continue
        series.append({"family": family, "prompt_set": prompt_set, "points": points})
        pair_rows += size_pairs(family, prompt_set, list(models), ats, ids)
    res.tables.append(
        Table.build(
            "size_models",
            "AT by model size",
            ["family", "prompt set", "model", "params", "prompts", "AT ± std"],
            model_rows,
        )
    )
    res.tables.append(
        Table.build(
            "size_pairs",
            "Size contrasts within a family (Cohen's d, Welch's t-test)",
            [
                "family",
                "prompt set",
                "smaller",
                "larger",
                "n smaller",
                "n larger",
                "shared prompts",
                "d (larger − smaller)",
                "effect",
                "t",
                "p",
            ],
            pair_rows,
            caption="d > 0: the larger model is more toxic; d and t over per-prompt AT",
        )
    )
    res.data = {"series": series}
    return res


def without_size_metadata(table: pa.Table) -> list[str]:
    """The models whose family or parameter count is unknown (left out of the size analysis)."""
    return sorted(
        {
            m
            for m, f, p in zip(
                table.column("model").to_pylist(),
                table.column("family").to_pylist(),
                table.column("params").to_pylist(),
                strict=True,
            )
            if f is None or p is None
        }
    )


def size_pairs(
    family: str, prompt_set: str, models: list[tuple[Any, Any]], ats: dict[str, np.ndarray], ids: dict[str, set[str]]
) -> list[list[Any]]:
    """One row per pair of different sizes in a family: Cohen's d and Welch's t of the larger minus the smaller
    model's per-prompt AT, with their prompt counts."""
    pair_rows: list[list[Any]] = []
    for (p_small, small), (p_large, large) in combinations(models, 2):
        if p_small == p_large:
            continue  # same size: not a size contrast (see the category analysis)
        d = cohen_d(ats[large], ats[small])
        test = welch_t(ats[large], ats[small])
        pair_rows.append(
            [
                family,
                prompt_set,
                small,
                large,
                len(ats[small]),
                len(ats[large]),
                len(ids[small] & ids[large]),
                d,
                effect_label(d),
                test.t if test else None,
                test.p if test else None,
            ]
        )
    return pair_rows
