"""combiner_trial: other forms of the non-English combiner, read out of fold against the head's own."""

from __future__ import annotations

import numpy as np
import pytest

from polytox.errors import PolytoxError
from polytox.training.scorer.data import Example
from polytox.training.scorer.measure import auc
from polytox.training.scorer.train import (
    OTHER,
    TrainConfig,
    apply_combiners,
    combiner_rows,
    fit_combiner,
    fit_combiners,
    other_view,
)
from research.scorer.combiner_trial import (
    HEAD,
    VARIANTS,
    Variant,
    english_scores,
    markdown,
    mean_auc_difference,
    measure,
    measure_english,
    nested_scores,
)


def two_languages(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Inputs whose first column carries language a's label and whose second carries b's, with opposite
    signs: a pooled combiner must trade one language against the other, one per language need not."""
    rng = np.random.default_rng(seed)
    langs = np.array(["a", "b"] * (n // 2))
    labels = rng.random(n) < 0.4
    inputs = rng.normal(size=(n, 2))
    inputs[langs == "a", 0] += 1.5 * labels[langs == "a"]
    inputs[langs == "b", 1] -= 1.5 * labels[langs == "b"]
    inputs[langs == "a", 1] += 1.5 * labels[langs == "a"]  # b's signal column points the other way in a
    folds = [np.arange(k, n, 5) for k in range(5)]
    return inputs, labels, langs, folds


def per_language_mean(labels: np.ndarray, scores: np.ndarray, langs: np.ndarray) -> float:
    values = [auc(labels[langs == x], scores[langs == x]) for x in ("a", "b")]
    return float(np.mean([v for v in values if v is not None]))


def test_own_combiners_beat_the_pooled_one_where_languages_disagree() -> None:
    inputs, labels, langs, folds = two_languages()
    pooled = nested_scores(Variant(), inputs, labels, langs, folds)
    own = nested_scores(Variant(form="own"), inputs, labels, langs, folds)
    loose = nested_scores(Variant(form="copies", scale=3.0), inputs, labels, langs, folds)
    tight = nested_scores(Variant(form="copies", scale=0.001), inputs, labels, langs, folds)
    assert not np.isnan(pooled).any() and ((pooled > 0) & (pooled < 1)).all()  # probabilities, every row
    assert per_language_mean(labels, own, langs) > per_language_mean(labels, pooled, langs) + 0.03
    assert per_language_mean(labels, loose, langs) > per_language_mean(labels, pooled, langs) + 0.03
    np.testing.assert_allclose(tight, pooled, atol=0.02)  # copies shrunk to nothing: the pooled combiner


def test_splines_bend_where_the_evidence_is_not_linear_and_unknown_forms_stop() -> None:
    rng = np.random.default_rng(2)
    n = 600
    inputs = rng.normal(size=(n, 2))
    labels = np.abs(inputs[:, 0]) + 0.3 * rng.normal(size=n) > 1.0  # toxic at both ends of the first input
    langs = np.array(["a", "b", "c"] * (n // 3))
    folds = [np.arange(k, n, 5) for k in range(5)]
    linear = nested_scores(Variant(), inputs, labels, langs, folds)
    curved = nested_scores(Variant(form="splines"), inputs, labels, langs, folds)
    assert auc(labels, curved) > 0.85 and auc(labels, linear) < 0.65  # type: ignore[operator]
    with pytest.raises(PolytoxError, match="unknown combiner form 'trees'"):
        nested_scores(Variant(form="trees"), inputs, labels, langs, folds)


def test_each_fold_is_scored_by_a_combiner_fitted_without_it() -> None:
    inputs, labels, langs, folds = two_languages()
    first = nested_scores(Variant(), inputs, labels, langs, folds)
    changed = labels.copy()
    changed[folds[0]] = ~changed[folds[0]]  # a fold's own labels cannot move its scores
    second = nested_scores(Variant(), inputs, changed, langs, folds)
    np.testing.assert_array_equal(first[folds[0]], second[folds[0]])
    assert not np.allclose(first[folds[1]], second[folds[1]])


def test_the_paired_difference_and_its_interval() -> None:
    inputs, labels, langs, folds = two_languages()
    groups = np.array([f"g{i // 2}" for i in range(len(labels))])
    pooled = nested_scores(Variant(), inputs, labels, langs, folds)
    same = mean_auc_difference(labels, langs, groups, pooled, pooled, n_boot=200)
    assert same == {"diff": 0.0, "ci": [0.0, 0.0]}
    own = nested_scores(Variant(form="own"), inputs, labels, langs, folds)
    better = mean_auc_difference(labels, langs, groups, own, pooled, n_boot=200)
    expected = per_language_mean(labels, own, langs) - per_language_mean(labels, pooled, langs)
    assert better["diff"] == pytest.approx(expected, abs=1e-4)
    assert 0 < better["ci"][0] < better["diff"] < better["ci"][1]


def pipeline_examples(n: int = 300, seed: int = 1) -> tuple[list[Example], dict[str, np.ndarray], np.ndarray]:
    """RTP-LX rows in en, de and fr with part outputs that carry their labels, and a held-out tail."""
    rng = np.random.default_rng(seed)
    langs = ["en", "de", "fr"]
    examples = [Example(text=f"text {i}", lang=langs[i % 3], target=0.0, label=bool(rng.random() < 0.4),
                        source="rtp-lx", group=f"rtp-lx:{i // 3}") for i in range(n)]
    labels = np.array([e.label for e in examples], dtype=float)
    raw = {key: rng.normal(size=n) + labels * rng.uniform(0.5, 1.5)
           for key in ("ngram", "emb", "probe", "ngram" + OTHER, "emb" + OTHER, "probe" + OTHER)}
    heldout = np.arange(n) >= n - 30
    return examples, raw, heldout


def head_combined(examples: list[Example], raw: dict[str, np.ndarray], folds: list[np.ndarray],
                  train_rows: np.ndarray) -> np.ndarray:
    """The out-of-fold combined scores as ``train.cross_validate`` forms them (mode full)."""
    config = TrainConfig()
    english = np.array([e.lang == "en" for e in examples])
    out = np.full(len(examples), np.nan)
    for test in folds:
        combiners = fit_combiners(config, examples, np.setdiff1d(train_rows, test), raw, "full")
        ngram = np.where(english, raw["ngram"], raw["ngram" + OTHER])
        emb = np.where(english, raw["emb"], raw["emb" + OTHER])
        out[test] = apply_combiners(combiners, "full", ngram[test], emb[test], english[test],
                                    raw["probe" + OTHER][test], raw["probe"][test])
    return out


def test_measure_refits_the_heads_combiner_and_refuses_other_scores() -> None:
    examples, raw, heldout = pipeline_examples()
    train_rows = np.flatnonzero(~heldout)
    folds = [train_rows[k::5] for k in range(5)]
    combined = head_combined(examples, raw, folds, train_rows)
    data = measure(combined, raw, folds, examples, heldout)
    assert set(data["variants"]) == set(VARIANTS)
    assert data["n_rows"] == len(train_rows) and data["n_other"] == 180
    english = [i for i in train_rows if examples[i].lang == "en"]
    labels = np.array([examples[i].label for i in english])
    en_auc = auc(labels, combined[english])
    assert en_auc is not None
    for entry in data["variants"].values():  # English keeps its combiner: the same AUC in every row
        assert entry["languages"]["en"] == round(en_auc, 4)
    assert "vs_head" not in data["variants"][HEAD] and "vs_head" in data["variants"]["own combiner per language"]
    table = markdown(data)
    assert table.count("\n") == len(VARIANTS) + 1 and HEAD in table
    only = measure(combined, raw, folds, examples, heldout, only=["own combiner per language"])
    assert set(only["variants"]) == {HEAD, "own combiner per language"}
    shifted = combined.copy()
    shifted[[i for i in train_rows if examples[i].lang == "de"][:5]] += 0.01  # not what the head's combiner gives
    with pytest.raises(PolytoxError, match="does not reproduce"):
        measure(shifted, raw, folds, examples, heldout)


def test_english_scores_refit_the_heads_english_combiner_and_bend_with_splines() -> None:
    examples, raw, heldout = pipeline_examples()
    train_rows = np.flatnonzero(~heldout)
    folds = [train_rows[k::5] for k in range(5)]
    combined = head_combined(examples, raw, folds, train_rows)
    english = np.array([e.lang == "en" for e in examples])
    en = train_rows[english[train_rows]]
    head = english_scores(Variant(), TrainConfig(), examples, raw, folds)
    np.testing.assert_allclose(head[en], combined[en], atol=1e-6)  # train.fit_combiners' English combiner
    assert np.isnan(head[~english]).all()  # only English rows go through the English combiner
    curved = english_scores(Variant(form="splines", knots="quantile"), TrainConfig(), examples, raw, folds)
    assert ((curved[en] > 0) & (curved[en] < 1)).all() and not np.allclose(curved[en], head[en], atol=1e-3)
    own = english_scores(Variant(own_ridges=True), TrainConfig(), examples, raw, folds)
    assert not np.allclose(own[en], head[en], atol=1e-4)  # the non-English fit rows read other inputs
    config = TrainConfig()
    for fold in folds:  # ... exactly: the linear combiner refitted on other_view's columns
        sel, fit_labels, fit_weight = combiner_rows(config, examples, np.setdiff1d(train_rows, fold))
        ngram, emb = other_view(raw, english, "ngram"), other_view(raw, english, "emb")
        combiner = fit_combiner(ngram[sel], emb[sel], fit_labels, fit_weight, raw["probe"][sel])
        test = fold[english[fold]]
        np.testing.assert_allclose(own[test], apply_combiners({"full": combiner}, "full", ngram[test], emb[test],
                                                              english[test], None, raw["probe"][test]), atol=1e-9)
    with pytest.raises(PolytoxError, match="pooled and spline forms"):
        english_scores(Variant(form="own"), TrainConfig(), examples, raw, folds)
    shifted = combined.copy()
    shifted[en[:5]] += 0.01  # not what the head's English combiner gives
    with pytest.raises(PolytoxError, match="English combiner does not reproduce"):
        measure_english(TrainConfig(), shifted, raw, folds, examples, heldout)
