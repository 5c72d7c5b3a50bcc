"""Toxicity vs safety: how two scorers stored on the same continuations agree (PTP §4.4, Table 5).

PTP compares Perspective (a toxicity scorer) with Llama Guard (a safety judge): Pearson r over the
continuations both scored, then the continuations where they differ most. Here any two stored scorers
(``--scorer`` and ``--scorer-b``, each with an attribute) are joined on (run, prompt, sample): r, the
agreement of their toxic / non-toxic labels at the threshold, and the top disagreements in both
directions with the prompt and continuation texts. Continuations only one scorer scored are counted.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import PolytoxError
from .common import generations_table
from .groups import values
from .options import AnalysisOptions
from .result import AnalysisResult, Table
from .run_collection import RunCollection
from .stats import pearson


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    if not opts.scorer or not opts.scorer_b:
        raise PolytoxError("the scorer comparison needs two stored scorers: --scorer A --scorer-b B")
    a_name, b_name = f"{opts.scorer}:{opts.attribute}", f"{opts.scorer_b}:{opts.attribute_b}"
    res = AnalysisResult(
        key="scorers",
        title=f"Scorer agreement: {a_name} vs {b_name}",
        reference="PTP §4.4 and Table 5 (toxicity vs safety detectors)",
        notes=opts.describe(),
    )
    ta, notes_a = generations_table(collection, opts, opts.scorer, opts.attribute)
    tb, notes_b = generations_table(collection, opts, opts.scorer_b, opts.attribute_b)
    res.notes += list(dict.fromkeys(notes_a + notes_b))
    con = collection.con
    con.register("agree_a", ta)
    con.register("agree_b", tb)
    joined = con.sql("""
        SELECT a.run_id, a.model, a.prompt_id, a.sample_index, a.lang,
               a.score AS score_a, b.score AS score_b
        FROM agree_a a JOIN agree_b b USING (run_id, prompt_id, sample_index)
        ORDER BY a.run_id, a.prompt_id, a.sample_index
    """).to_arrow_table()
    con.unregister("agree_a")
    con.unregister("agree_b")
    sa, sb = values(joined, "score_a"), values(joined, "score_b")
    has_a, has_b = ~np.isnan(sa), ~np.isnan(sb)
    both = has_a & has_b
    x, y = sa[both], sb[both]
    counts = {
        "continuations in both": len(joined),
        "scored by both": int(both.sum()),
        f"only {a_name}": int((has_a & ~has_b).sum()),
        f"only {b_name}": int((has_b & ~has_a).sum()),
        "by neither": int((~has_a & ~has_b).sum()),
    }
    if len(joined) == 0:
        res.notes.append("no run stores both scorers; store the second scorer's scores on the same generations first")
    spec = collection.metrics
    c = pearson(x, y)
    tox_a = x >= spec.threshold if spec.comparison == ">=" else x > spec.threshold
    tox_b = y >= spec.threshold if spec.comparison == ">=" else y > spec.threshold
    rows: list[list[Any]] = [[k, v] for k, v in counts.items()]
    rows += [
        ["Pearson r", c.r if c else None],
        ["p", c.p if c else None],
        ["label agreement", float((tox_a == tox_b).mean()) if len(x) else None],
        [f"toxic by {a_name} only", int((tox_a & ~tox_b).sum())],
        [f"toxic by {b_name} only", int((tox_b & ~tox_a).sum())],
        ["toxic by both", int((tox_a & tox_b).sum())],
    ]
    res.tables.append(
        Table.build(
            "agreement",
            "Agreement",
            ["statistic", "value"],
            rows,
            caption=f"toxic label = score {spec.comparison} {spec.threshold}",
        )
    )
    idx = np.flatnonzero(both)
    diff = x - y
    cols = ["model", "lang", f"{a_name}", f"{b_name}", "difference", "prompt", "continuation"]

    def listing(order: np.ndarray) -> list[list[Any]]:
        picked = order[: opts.top]
        rows = collection.texts(joined.take(pa.array(idx[picked], type=pa.int64())))
        cols = {c: rows.column(c).to_pylist() for c in ("model", "lang", "prompt_text", "text")}
        return [
            [cols["model"][n], cols["lang"][n], x[j], y[j], diff[j], cols["prompt_text"][n], cols["text"][n]]
            for n, j in enumerate(picked)
        ]

    res.tables.append(
        Table.build(
            "a_over_b",
            f"Top disagreements: {a_name} much higher than {b_name}",
            cols,
            listing(np.argsort(-diff, kind="stable")),
        )
    )
    res.tables.append(
        Table.build(
            "b_over_a",
            f"Top disagreements: {b_name} much higher than {a_name}",
            cols,
            listing(np.argsort(diff, kind="stable")),
        )
    )
    if len(x) > 50_000:
        sample = np.random.default_rng(0).choice(len(x), 50_000, replace=False)
        px, py = x[sample], y[sample]
    else:
        px, py = x, y
    res.data = {"x": px.tolist(), "y": py.tolist(), "a": a_name, "b": b_name, "r": c.r if c else None}
    return res
