"""Prompt sources: the same model over several prompt sets (PTP §4.6, Figure 9: PTP vs RTP-LX vs WildChat).

For every model evaluated on two or more prompt sets: AT ± std per set, overall and per language, and
pairwise Cohen's d / Welch's t-test between sets. A run's prompt set is the format its prompts were read
as (RTP, RTP-LX, PTP, WildChat) unless the manifest or the metadata YAML names it.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from .common import prompts_table, small_note
from .groups import split, values
from .options import AnalysisOptions
from .result import AnalysisResult, Table, pm
from .run_collection import RunCollection
from .stats import cohen_d, describe, effect_label, welch_t


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    res = AnalysisResult(
        key="sources",
        title="Toxicity by prompt source",
        reference="PTP §4.6, Figure 9",
        notes=opts.describe(),
    )
    table, notes = prompts_table(collection, opts)
    res.notes += notes
    sets = sorted(set(table.column("prompt_set").to_pylist()))
    by_model = split(table, ["model"])
    overall_rows, lang_rows, pair_rows = [], [], []
    series: list[dict[str, Any]] = []
    single = []
    for (model,), sub in by_model.items():
        per_set = {ps: values(part, "mean_tox") for (ps,), part in split(sub, ["prompt_set"]).items()}
        if len(per_set) < 2:
            single.append(model)
        cells: list[Any] = []
        points = {}
        for ps in sets:
            if ps in per_set:
                s = describe(per_set[ps])
                cells += [pm(s.mean, s.std), s.n]
                points[ps] = s.mean
                note = small_note(f"{model} · {ps}", s.n)
                if note:
                    res.notes.append(note)
            else:
                cells += [None, None]
        overall_rows.append([model, *cells])
        series.append({"model": model, "at": [points.get(ps) for ps in sets]})
        for (lang,), part in split(sub, ["lang"]).items():
            lp = {ps: values(x, "mean_tox") for (ps,), x in split(part, ["prompt_set"]).items()}
            if len(lp) < 2:
                continue
            lang_rows.append(
                [
                    model,
                    lang,
                    *[
                        v
                        for ps in sets
                        for v in (
                            (pm(describe(lp[ps]).mean, describe(lp[ps]).std), len(lp[ps])) if ps in lp else (None, None)
                        )
                    ],
                ]
            )
        for a, b in combinations(sorted(per_set), 2):
            d = cohen_d(per_set[a], per_set[b])
            test = welch_t(per_set[a], per_set[b])
            pair_rows.append(
                [
                    model,
                    a,
                    b,
                    len(per_set[a]),
                    len(per_set[b]),
                    d,
                    effect_label(d),
                    test.t if test else None,
                    test.p if test else None,
                ]
            )
    if single:
        res.notes.append(f"evaluated on one prompt set only: {', '.join(single)}")
    cols = [c for ps in sets for c in (f"{ps} AT ± std", f"{ps} n")]
    res.tables.append(Table.build("by_source", "AT by prompt set", ["model", *cols], overall_rows))
    res.tables.append(
        Table.build(
            "by_source_lang",
            "AT by prompt set and language (languages with 2+ sets)",
            ["model", "lang", *cols],
            lang_rows,
        )
    )
    res.tables.append(
        Table.build(
            "source_pairs",
            "Prompt-set contrasts per model (Cohen's d, Welch's t-test)",
            ["model", "set A", "set B", "n A", "n B", "d (A − B)", "effect", "t", "p"],
            pair_rows,
            caption="d > 0: set A draws out more toxicity",
        )
    )
    res.data = {"sets": sets, "series": series}
    return res
