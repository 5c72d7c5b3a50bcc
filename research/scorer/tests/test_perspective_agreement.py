"""Perspective's own agreement with the RTP-LX annotators: the rows it joins and the three measures."""

from __future__ import annotations

import numpy as np
import pytest

from polytox.training.scorer.scale_rows import RATERS, ScaleRow
from research.scorer.perspective_agreement import (
    Rated,
    agreement,
    cross_fitted_kappa,
    fold_of,
    measure,
    rated_rows,
    summary,
)


def _row(text: str, lang: str, target: str, value: float, index: str, heldout: bool, rating: float | None) -> ScaleRow:
    return ScaleRow(text, lang, "web", target, value, heldout, f"g{index}", "rtp-lx", index, None, rating)


def test_rows_join_a_rating_with_its_english_sources_score_of_one_era() -> None:
    rows = [
        _row("hallo", "de", RATERS, 0.3, "1", False, 2.0),
        _row("hallo", "de", "anchor:perspective-2020", 0.8, "1", False, None),
        _row("hallo", "de", "anchor:unknown", 0.6, "1", False, None),
        _row("tschüss", "de", RATERS, 0.0, "2", True, 1.0),  # no anchor: out
        _row("bonjour", "fr", "anchor:perspective-2020", 0.9, "3", True, None),  # no rating: out
        _row("ciao", "it", RATERS, 1.0, "4", True, 4.5),
        _row("ciao", "it", "anchor:perspective-2020", 0.95, "4", True, None),
    ]
    got = rated_rows(rows, "perspective-2020")
    assert sorted(got) == ["de", "it"]
    assert got["de"].text == ["hallo"] and got["de"].persp.tolist() == [0.8] and got["de"].rating.tolist() == [2.0]
    assert got["it"].heldout.tolist() == [True] and not got["de"].heldout.any()
    assert rated_rows(rows, "unknown")["de"].persp.tolist() == [0.6]


def _levels(per_level: int = 10) -> tuple[np.ndarray, np.ndarray]:
    ratings = np.repeat(np.arange(1.0, 6.0), per_level)
    index = np.array([f"i{k:03d}" for k in range(len(ratings))])
    return ratings, index


def test_a_perfect_reading_a_constant_and_a_reversed_one() -> None:
    ratings, index = _levels()
    perfect = agreement(ratings, (ratings - 1) / 4, index)
    assert perfect["kappa_fixed"] == pytest.approx(1.0) and perfect["auc"] == pytest.approx(1.0)
    assert perfect["kappa_fitted"] is not None and perfect["kappa_fitted"] > 0.9
    const = agreement(ratings, np.full(len(ratings), 0.4), index)
    assert const["kappa_fixed"] == pytest.approx(0.0) and const["auc"] == pytest.approx(0.5)
    assert const["kappa_fitted"] == pytest.approx(0.0)
    backwards = agreement(ratings, (5 - ratings) / 4, index)
    assert backwards["kappa_fixed"] == pytest.approx(-0.5) and backwards["auc"] == pytest.approx(0.0)
    # a monotone squeeze keeps the fitted cuts' kappa and AUC but not the fixed cuts'
    squeezed = agreement(ratings, 0.8 + (ratings - 1) / 40, index)
    assert squeezed["auc"] == pytest.approx(1.0) and squeezed["kappa_fitted"] > 0.9
    assert squeezed["kappa_fixed"] < 0.3


def test_folds_follow_the_index_and_cuts_never_see_their_own_fold() -> None:
    index = np.array(["a", "b", "a", "c", "d", "e", "f", "b"])
    folds = fold_of(index)
    assert folds[0] == folds[2] and folds[1] == folds[7] and len(set(folds.tolist())) == 5
    ratings, idx = _levels()
    f = fold_of(idx)
    values = (ratings - 1) / 4
    # one fold read a full level higher: cuts fitted on the others place its texts a level up
    shifted = values + np.where(f == 0, 0.25, 0.0)
    assert cross_fitted_kappa(ratings, shifted, f) < cross_fitted_kappa(ratings, values, f)
    assert cross_fitted_kappa(ratings, values, np.zeros(len(values), dtype=int)) is None


def test_the_head_is_read_on_every_row_and_on_the_held_out_ones_alone() -> None:
    ratings, index = _levels()
    persp = np.random.default_rng(0).permutation((ratings - 1) / 4)  # a reading that ignores the text
    held = np.arange(len(ratings)) % 2 == 0
    data = {"de": Rated([f"t{k}" for k in range(len(ratings))], index, ratings, persp, held)}
    seen: list[tuple[int, str]] = []

    def head(texts: list[str], lang: str) -> np.ndarray:
        seen.append((len(texts), lang))
        return (ratings - 1) / 4

    rows = measure(data, head)
    assert seen == [(50, "de")]
    r = rows["de"]
    assert r["n_heldout"] == 25 and r["head_heldout"]["n"] == 25 and r["perspective_heldout"]["n"] == 25
    assert r["head"]["kappa_fixed"] == pytest.approx(1.0)
    assert r["perspective"]["kappa_fixed"] < r["head"]["kappa_fixed"]
    assert r["constant"]["auc"] == pytest.approx(0.5)
    s = summary(rows)
    assert s["head.kappa_fixed.all"] == pytest.approx(1.0) and "head.kappa_fixed.other" in s
    gap = r["head_vs_perspective"]
    v, low = (ratings - 1) / 4, ratings < 2.5
    assert gap["n_low"] == 20 and gap["mae"] == pytest.approx(np.abs(v - persp).mean(), abs=1e-4)
    assert gap["diff_low"] == pytest.approx((v - persp)[low].mean(), abs=1e-4)
    assert gap["diff_high"] == pytest.approx((v - persp)[~low].mean(), abs=1e-4)
    assert s["head_vs_perspective.mae.all"] == pytest.approx(gap["mae"], abs=1e-4)
    assert measure(data, None)["de"].keys() == {"n_heldout", "perspective", "constant"}
    assert "head_vs_perspective.mae.all" not in summary(measure(data, None))
