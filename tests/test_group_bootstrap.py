"""Group bootstrap CIs of the scorer card: exact weighted statistics, groups as the sampling unit, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from polytox.scoring.ml.card import target_rows
from polytox.training.scorer.group_bootstrap import group_weights, percentile_ci, weighted_auc, weighted_mean


def test_weighted_auc_equals_scikit_learn_with_sample_weights_ties_included() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    scores = np.round(rng.random(500), 1)  # 11 distinct values: many ties
    labels = rng.random(500) < scores
    weights = group_weights([f"g{i // 3}" for i in range(500)], n_boot=20, seed=1)
    got = weighted_auc(labels, scores, weights)
    for b in range(20):
        assert got[b] == pytest.approx(metrics.roc_auc_score(labels, scores, sample_weight=weights[b]), abs=1e-12)
    assert weighted_auc(labels, scores, np.ones((1, 500)))[0] == pytest.approx(metrics.roc_auc_score(labels, scores))


def test_weighted_auc_is_nan_without_both_classes() -> None:
    labels = np.array([True, True, False, False])
    weights = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]])
    got = weighted_auc(labels, np.array([0.9, 0.8, 0.1, 0.2]), weights)
    assert np.isnan(got[0]) and got[1] == 1.0
    assert percentile_ci(got) == [1.0, 1.0]  # NaN resamples are left out
    assert percentile_ci(np.array([np.nan])) == [None, None]


def test_group_weights_resample_whole_groups() -> None:
    groups = ["a", "a", "b", "c", "c", "c"]
    w = group_weights(groups, n_boot=200, seed=0)
    assert w.shape == (200, 6)
    assert np.all(w[:, 0] == w[:, 1]) and np.all(w[:, 3] == w[:, 5])  # a group's rows move together
    per_group = w[:, [0, 2, 3]]
    assert np.all(per_group.sum(axis=1) == 3)  # each resample draws 3 groups
    np.testing.assert_array_equal(w, group_weights(groups, n_boot=200, seed=0))  # seeded: reproducible
    assert not np.array_equal(w, group_weights(groups, n_boot=200, seed=1))


def test_groups_widen_the_interval_when_rows_are_copies() -> None:
    """Ten identical rows per group carry one group's information: the CI must be as wide as for one row
    per group, not sqrt(10) times narrower as a row bootstrap would make it."""
    rng = np.random.default_rng(0)
    values = rng.random(60)
    one_row = percentile_ci(weighted_mean(values, group_weights([str(i) for i in range(60)], seed=2)))
    copies = np.repeat(values, 10)
    grouped = percentile_ci(weighted_mean(copies, group_weights(np.repeat(np.arange(60).astype(str), 10), seed=2)))
    by_row = percentile_ci(weighted_mean(copies, group_weights([str(i) for i in range(600)], seed=2)))
    width = [hi - lo for lo, hi in (one_row, grouped, by_row)]  # type: ignore[operator]
    assert grouped == one_row  # same draws of the same 60 values
    assert width[2] < 0.45 * width[1]


def test_target_rows_verdicts() -> None:
    data = {
        "targets": {"mean_auc": 0.85, "min_auc": 0.75, "perspective_auc": 0.95, "mae": 0.05, "share_points": 1.0,
                    "emt": 0.02, "ep": 0.04, "at": 0.02},
        "card": {"default": {
            "mean_auc_humans": 0.80, "mean_auc_humans_ci": [0.79, 0.81],  # missed, CI short of the target
            "min_auc_humans": 0.74, "min_auc_humans_ci": [0.70, 0.78], "min_auc_language": "cs",
            "auc_prompts": 0.96, "auc_prompts_ci": [0.955, 0.965],  # met
            "auc_model_continuations": 0.96, "auc_model_continuations_ci": [0.92, 0.99],  # met, CI crosses
            "mae_web": 0.10, "mae_web_ci": [0.09, 0.11],
            "mae_model_continuations": 0.066, "mae_model_continuations_ci": [0.045, 0.091],
            "mae_floor_model_continuations": 0.0634, "mae_floor_oof_model_continuations": 0.0712,
            "mae_floor_oof_web": 0.104,  # printed only beside the in-sample floor, which this row lacks
            "share_web": 0.373, "perspective_share_web": 0.384, "share_diff_web_ci": [-0.021, 0.0],
        }},
        "scorers": {"default": {"run": [{"model": "all models", "n_prompts": 64, "emt_diff": -0.032,
                                          "emt_diff_ci": [-0.062, -0.002], "ep_diff": 0.016,
                                          "ep_diff_ci": [-0.062, 0.109], "at_diff": -0.03,
                                          "at_diff_ci": [-0.05, -0.021]}]}},
    }
    rows = {r[0]: r for r in target_rows(data)[1:]}
    assert rows["AUC vs humans, mean of 17 languages"][3] == "missed"
    assert rows["AUC vs humans, lowest language (cs)"][3] == "missed; CI reaches the target"
    assert rows["AUC vs Perspective, web prompts"][3] == "met"
    assert rows["AUC vs Perspective, model continuations"][3] == "met; CI crosses the target"
    assert "AUC vs Perspective, web continuations" not in rows  # not in the file: no row, no made-up value
    assert rows["MAE vs Perspective, web"][1:] == ["<= 0.05", "0.100 [0.090, 0.110]", "missed"]  # file has no floor
    assert rows["MAE vs Perspective, model continuations"][3] == \
        "missed; CI reaches the target; best monotone map of this score: 0.063 in sample, 0.071 out of fold"
    share = rows["share >= 0.5 minus Perspective's, web"]
    assert share[2] == "-1.10 pt [-2.10, +0.00]" and share[3] == "missed; CI reaches the target"
    pairs = "(64 (model, prompt) pairs)"
    assert rows[f"EMT diff, real run {pairs}"][3] == "missed; CI reaches the target"
    assert rows[f"EP diff, real run {pairs}"][3] == "met; CI crosses the target"
    assert rows[f"AT diff, real run {pairs}"][3] == "missed"  # CI [-0.05, -0.021] stays outside +-0.02
