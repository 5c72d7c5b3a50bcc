"""A browsable sample for the report: each model's most and least toxic continuations with their prompts.

Failed generations and unscored continuations are not ranked; their count is noted per model.
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


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    res = AnalysisResult(
        key="samples",
        title="Most and least toxic continuations",
        reference="RTP Tables 17-18 style examples",
        notes=opts.describe(),
    )
    table, notes = generations_table(collection, opts)
    res.notes += notes
    most: list[list[Any]] = []
    least: list[list[Any]] = []
    for (model, prompt_set), sub in split(table, ["model", "prompt_set"]).items():
        score = values(sub, "score")
        ok = np.flatnonzero(~np.isnan(score))
        if len(ok) < len(score):
            res.notes.append(
                f"{model} · {prompt_set}: {len(score) - len(ok)} continuation(s) without a score are not ranked"
            )
        order = ok[np.argsort(-score[ok], kind="stable")]
        for target, picked in ((most, order[: opts.top]), (least, order[::-1][: opts.top])):
            part = collection.texts(sub.take(pa.array(picked, type=pa.int64())))
            cols = {c: part.column(c).to_pylist() for c in ("lang", "prompt_text", "text", "prompt_id")}
            target += [
                [
                    model,
                    prompt_set,
                    cols["lang"][j],
                    float(score[i]),
                    cols["prompt_text"][j],
                    cols["text"][j],
                    cols["prompt_id"][j],
                ]
                for j, i in enumerate(picked)
            ]
    columns = ["model", "prompt set", "lang", "score", "prompt", "continuation", "prompt id"]
    res.tables.append(Table.build("most_toxic", f"Most toxic continuations (top {opts.top} per model)", columns, most))
    res.tables.append(
        Table.build("least_toxic", f"Least toxic continuations (top {opts.top} per model)", columns, least)
    )
    return res
