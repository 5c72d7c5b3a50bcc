"""The curved combiner (head format 5): each input through a cubic spline, then a logistic regression. The
head's folded form must score exactly as the scikit-learn pipeline it was fitted as, inside and beyond the
fitted range, and survive the head file."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from polytox.errors import PolytoxError
from polytox.scoring.ml.head import CurvedCombiner, MlHead, apply_combiner, combiner_reads_probe
from polytox.scoring.ml.ngrams import NgramConfig
from polytox.training.scorer.data import Example
from polytox.training.scorer.train import TrainConfig, fit_combiner, fit_combiners, spline_combiner_model


def bent_inputs(n: int = 800, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three inputs whose first carries the label at both ends (no linear combiner can read it)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    labels = np.abs(x[:, 0]) + 0.5 * x[:, 2] + 0.3 * rng.normal(size=n) > 1.2
    return x, labels, rng.uniform(0.5, 3.0, size=n)


def test_the_folded_splines_score_as_the_pipeline_inside_and_beyond_the_fitted_range() -> None:
    x, labels, weight = bent_inputs()
    pipeline = spline_combiner_model().fit(x, labels, logisticregression__sample_weight=weight)
    curved = fit_combiner(x[:, 0], x[:, 1], labels, weight, x[:, 2], curved=True)
    assert isinstance(curved, CurvedCombiner) and combiner_reads_probe(curved) and len(curved.knots) == 3
    test = np.random.default_rng(6).normal(size=(300, 3)) * 3  # a third of it outside the fitted range
    expected = pipeline.predict_proba(test)[:, 1]
    got = apply_combiner(curved, test[:, 0], test[:, 1], test[:, 2])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)
    linear = fit_combiner(x[:, 0], x[:, 1], labels, weight, x[:, 2])
    assert not np.allclose(apply_combiner(linear, test[:, 0], test[:, 1], test[:, 2]), expected, atol=0.05)
    two = fit_combiner(x[:, 0], x[:, 1], labels, weight, curved=True)  # without a probe: two splines
    assert isinstance(two, CurvedCombiner) and not combiner_reads_probe(two)
    with pytest.raises(PolytoxError, match="reads the attention probe"):
        apply_combiner(curved, test[:, 0], test[:, 1])
    with pytest.raises(PolytoxError, match="3 splines got 2 inputs"):
        curved.logit([test[:, 0], test[:, 1]])


def test_a_head_with_a_curved_combiner_is_format_5_and_scores_the_same_after_loading(tmp_path: Path) -> None:
    x, labels, weight = bent_inputs()
    curved = fit_combiner(x[:, 0], x[:, 1], labels, weight, curved=True)
    head = MlHead(ngram=NgramConfig(n_features=16), idf=np.ones(16, dtype=np.float32),
                  w_ngram=np.zeros(16, dtype=np.float32), b_ngram=0.0,
                  combine={"full": (0.1, 1.0, 2.0), "full:other": curved}, backbone="x", layers=(1,),
                  emb_mean=np.zeros(6, dtype=np.float32), emb_scale=np.ones(6, dtype=np.float32),
                  w_emb=np.ones(6, dtype=np.float32))
    head.save(tmp_path / "h.npz")
    with np.load(io.BytesIO((tmp_path / "h.npz").read_bytes())) as data:
        header = json.loads(bytes(data["header"]).decode())
    assert header["format"] == 5 and header["combine"]["full:other"]["form"] == "splines"
    loaded = MlHead.load(tmp_path / "h.npz")
    assert loaded.combine["full:other"] == curved and loaded.combine["full"] == (0.1, 1.0, 2.0)
    langs = ["de", "en"] * 50
    ngram, emb = x[:100, 0], x[:100, 1]
    p = loaded.raw_probability(ngram, emb, "full", langs)
    other = np.array([lang != "en" for lang in langs])
    np.testing.assert_allclose(p[other], apply_combiner(curved, ngram[other], emb[other]), atol=1e-12)
    np.testing.assert_allclose(p[~other], 1 / (1 + np.exp(-(0.1 + ngram[~other] + 2 * emb[~other]))), atol=1e-12)
    head.combine["full:other"] = (0.0, 1.0, 1.0)
    head.save(tmp_path / "linear.npz")  # no curved combiner: the lowest format that holds it again
    with np.load(io.BytesIO((tmp_path / "linear.npz").read_bytes())) as data:
        assert json.loads(bytes(data["header"]).decode())["format"] == 2


def test_the_config_names_which_combiners_are_curved() -> None:
    x, labels, _ = bent_inputs(n=300)
    langs = ["en", "de", "fr"]
    examples = [Example(text=f"t{i}", lang=langs[i % 3], target=float(labels[i]), label=bool(labels[i]),
                        source="rtp-lx", group=f"rtp-lx:{i}") for i in range(len(labels))]
    raw = {"ngram": x[:, 0], "emb": x[:, 1], "ngram:other": x[:, 0], "emb:other": x[:, 1], "probe:other": x[:, 2]}
    rows = np.arange(len(examples))
    plain = fit_combiners(TrainConfig(), examples, rows, raw, "full")
    assert all(isinstance(c, tuple) for c in plain.values())
    curved = fit_combiners(TrainConfig(combiner_splines=("full:other",)), examples, rows, raw, "full")
    assert isinstance(curved["full:other"], CurvedCombiner) and curved["full"] == plain["full"]
    assert len(curved["full:other"].knots) == 3  # the non-English combiner reads its probe
    ngram_mode = fit_combiners(TrainConfig(combiner_splines=("full:other",)), examples, rows, raw, "ngram")
    assert all(isinstance(c, tuple) for c in ngram_mode.values())  # only mode full is ever curved


def test_train_scorer_names_the_curved_combiners_and_refuses_others() -> None:
    from polytox.cli.train_scorer_cmd import combiner_splines

    assert combiner_splines("") is None
    assert combiner_splines("full:other") == ("full:other",)
    assert combiner_splines(" full , full:other ") == ("full", "full:other")
    with pytest.raises(PolytoxError, match="unknown combiner"):
        combiner_splines("full:en")
