"""stack_trial: two sub-threshold changes read together, judged by the rule written before the run."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from polytox.training.scorer.train import OTHER
from research.scorer.combiner_trial import HEAD, NonEnglishRows, Variant, nested_scores
from research.scorer.stack_trial import SHARED, STACK, STACK_EXTRA, WIDE, markdown, verdict
from research.scorer.tests.test_combiner_trial import head_combined, pipeline_examples


def card(auc: float, mae: float) -> dict[str, Any]:
    return {"auc_prompts": auc, "auc_web_continuations": auc, "auc_model_continuations": auc + 0.02,
            "mae_web": mae, "mae_model_continuations": mae / 2, "share_model_continuations": 0.05,
            "ece_web": 0.002, "ece_model_continuations": 0.008,
            "run": {"n_prompts": 128, "emt_diff": 0.01, "ep_diff": 0.0, "at_diff": 0.007}}


def entry(mean: float, low: float, diff: float | None = None, ci_low: float = 0.001) -> dict[str, Any]:
    out: dict[str, Any] = {"mean": mean, "min": low, "min_lang": "cs", "languages": {"cs": low, "de": 0.82, "sv": 0.82}}
    if diff is not None:
        out["vs_head"] = {"diff": diff, "ci": [ci_low, diff + 0.002]}
    return out


def passing() -> dict[str, Any]:
    return {"variants": {HEAD: entry(0.847, 0.762), WIDE: entry(0.8487, 0.758, 0.0017),
                         SHARED: entry(0.8487, 0.767, 0.0016, -0.0005), STACK: entry(0.8505, 0.7605, 0.0035)},
            "english": {HEAD: card(0.959, 0.1006), WIDE: card(0.9585, 0.1012)}}


def test_the_verdict_takes_every_clause_of_the_rule() -> None:
    assert verdict(passing()) == {"mean_gain": True, "lowest": True, "english_auc": True, "english_mae": True,
                                  "adopt": True}
    for clause, change in {
        "mean_gain": lambda d: d["variants"][STACK].update(vs_head={"diff": 0.0029, "ci": [0.001, 0.005]}),
        "lowest": lambda d: d["variants"][STACK].update(min=0.7599),  # 0.0021 below the head's lowest
        "english_auc": lambda d: d["english"][WIDE].update(auc_model_continuations=0.9779),
        "english_mae": lambda d: d["english"][WIDE].update(mae_web=0.1017),
    }.items():
        data = copy.deepcopy(passing())
        change(data)
        result = verdict(data)
        assert not result[clause] and not result["adopt"], clause
        assert all(ok for k, ok in result.items() if k not in (clause, "adopt"))
    wide_ci = copy.deepcopy(passing())
    wide_ci["variants"][STACK]["vs_head"] = {"diff": 0.004, "ci": [-0.0001, 0.008]}  # gain, but CI reaches zero
    assert not verdict(wide_ci)["mean_gain"]
    data = passing()
    data["verdict"] = verdict(data)
    table = markdown(data)
    assert STACK in table and WIDE in table and table.rstrip().endswith("-> adopt")
    assert "+0.0035 [+0.0010, +0.0055]" in table


def test_extra_inputs_read_the_pipelines_own_shared_ridges() -> None:
    examples, raw, heldout = pipeline_examples()
    train_rows = np.flatnonzero(~heldout)
    folds = [train_rows[k::5] for k in range(5)]
    combined = head_combined(examples, raw, folds, train_rows)
    rows = NonEnglishRows.of(examples, heldout, folds)
    assert len(rows.lx) == len(train_rows) and len(rows.other) == 180
    assert all(examples[i].lang != "en" for i in rows.other)
    np.testing.assert_allclose(rows.scores(Variant(), raw, combined)[rows.lx], combined[rows.lx], atol=1e-6)
    stacked = rows.scores(Variant(extra=STACK_EXTRA), raw, combined)
    inputs = np.column_stack([raw[k][rows.other] for k in ("ngram" + OTHER, "emb" + OTHER, "probe" + OTHER,
                                                                  *STACK_EXTRA)])
    expected = nested_scores(Variant(extra=STACK_EXTRA), inputs, rows.labels[rows.other], rows.langs[rows.other],
                             rows.folds)
    np.testing.assert_allclose(stacked[rows.other], expected, atol=1e-12)
    english = rows.lx[rows.langs[rows.lx] == "en"]
    np.testing.assert_array_equal(stacked[english], combined[english])  # English keeps its own combiner
    assert rows.versus(combined, combined) == {"diff": 0.0, "ci": [0.0, 0.0]}
    assert rows.aucs(stacked)["mean"] != pytest.approx(rows.aucs(combined)["mean"], abs=1e-6)
