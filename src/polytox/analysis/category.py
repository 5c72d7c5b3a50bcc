"""Category and alignment: base vs instruct vs preference-tuned models, and alignment methods
(PTP §4.3, Figures 6 and 7).

Per-prompt AT of every model in a group is pooled (PTP: "toxicity levels aggregated over base, instruct,
and preference models"); groups are compared pairwise with Cohen's d and Welch's t-test. Alignment
methods (DPO, KTO, IPO, PPO, ...) are compared the same way, overall and within each family (Figure 7
compares methods on the same base model).
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
from .runs import CATEGORIES
from .stats import cohen_d, describe, effect_label, welch_t


def _compare(
    res: AnalysisResult,
    name: str,
    title: str,
    groups: dict[str, np.ndarray],
    models: dict[str, set[str]],
    label: str,
) -> list[dict[str, Any]]:
    rows, pairs, points = [], [], []
    for key, at in groups.items():
        s = describe(at)
        rows.append([key, len(models[key]), s.n, pm(s.mean, s.std)])
        points.append({"group": key, "at": s.mean, "std": s.std, "n": s.n})
        note = small_note(f"{label} {key}", s.n)
        if note:
            res.notes.append(note)
    for a, b in combinations(list(groups), 2):
        d = cohen_d(groups[a], groups[b])
        test = welch_t(groups[a], groups[b])
        pairs.append(
            [
                a,
                b,
                len(groups[a]),
                len(groups[b]),
                d,
                effect_label(d),
                test.t if test else None,
                test.p if test else None,
            ]
        )
    res.tables.append(Table.build(name, title, [label, "models", "prompts", "AT ± std"], rows))
    if pairs:
        res.tables.append(
            Table.build(
                f"{name}_pairs",
                f"{title}: pairwise",
                [f"{label} A", f"{label} B", "n A", "n B", "d (A − B)", "effect", "t", "p"],
                pairs,
                caption="d > 0: A more toxic; per-prompt AT pooled over the group's models",
            )
        )
    return points


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    res = AnalysisResult(
        key="category",
        title="Base vs instruct vs preference tuning, and alignment methods",
        reference="PTP §4.3, Figures 6 and 7",
        notes=opts.describe(),
    )
    table, notes = prompts_table(collection, opts)
    res.notes += notes
    models_by = {
        m: c for m, c in zip(table.column("model").to_pylist(), table.column("category").to_pylist(), strict=True)
    }
    uncategorised = sorted(m for m, c in models_by.items() if c is None)
    if uncategorised:
        res.notes.append(f"no category metadata for {', '.join(uncategorised)}; left out of the category comparison")
    cats = split(table, ["category"])
    groups = {c: values(sub, "mean_tox") for (c,), sub in cats.items() if c is not None}
    groups = {c: groups[c] for c in [*CATEGORIES, *sorted(set(groups) - set(CATEGORIES))] if c in groups}
    members = {c: set(cats[(c,)].column("model").to_pylist()) for c in groups}
    for c in CATEGORIES:
        if c not in groups:
            res.notes.append(f"no {c} model among the runs")
    cat_points = _compare(res, "categories", "AT by model category", groups, members, "category")

    aligned = table.filter(pa.array([a is not None for a in table.column("alignment").to_pylist()]))
    al = split(aligned, ["alignment"])
    agroups = {a: values(sub, "mean_tox") for (a,), sub in al.items()}
    amembers = {a: set(sub.column("model").to_pylist()) for (a,), sub in al.items()}
    if not agroups:
        res.notes.append("no alignment metadata among the runs; no alignment comparison")
    align_points = _compare(res, "alignment", "AT by alignment method", agroups, amembers, "alignment")
    fam_rows = []
    for (family, method), sub in split(aligned, ["family", "alignment"]).items():
        s = describe(values(sub, "mean_tox"))
        fam_rows.append(
            [family, method, ", ".join(sorted(set(sub.column("model").to_pylist()))), s.n, pm(s.mean, s.std)]
        )
    if fam_rows:
        res.tables.append(
            Table.build(
                "alignment_by_family",
                "AT by alignment method within each family (Figure 7)",
                ["family", "alignment", "models", "prompts", "AT ± std"],
                fam_rows,
            )
        )
    res.data = {"categories": cat_points, "alignment": align_points}
    return res
