"""The cross-language maps (``scale_languages``): equipercentile equating over RTP-LX pairs and its checks.

The failure they replace: a regression onto each English source's score over a mostly toxic sample lifts
the harmless end (harmless German read 0.31 where English read 0.04). On synthetic pairs whose translation
raw scores are a monotone distortion of their English texts', equating must give every translation its
English text's value, at the harmless end too; with a noisy ranking it lifts the harmless end less than the
regression it replaced.
"""

from __future__ import annotations

import numpy as np
import pytest

from polytox.scoring.calibration import fit_isotonic
from polytox.training.scorer.scale_languages import (
    PRESERVING,
    Pairs,
    equipercentile,
    fit_equated,
    kappa,
    language_checks,
    summarise,
)


def _pairs(n: int = 3000, toxic_share: float = 0.88, seed: int = 0, noise: float = 0.0) -> Pairs:
    """Mostly toxic pairs (as RTP-LX's anchors), German raw = a compressing distortion of English raw."""
    rng = np.random.default_rng(seed)
    toxic = rng.random(n) < toxic_share
    level = np.where(toxic, rng.uniform(3, 5, n), rng.uniform(1, 1.4, n))
    r_e = np.clip((level - 1) / 4 + rng.normal(0, 0.05, n), 0, 1)
    r_t = np.clip(0.05 + 0.5 * r_e**1.5 + rng.normal(0, noise, n), 0, 1)  # the head compresses German
    return Pairs(index=np.array([f"lx:{i}" for i in range(n)], dtype=object), lang=np.array(["de"] * n, dtype=object),
                 r_t=r_t, h_t=level, r_e=r_e, h_e=level, persp=np.full(n, np.nan))


def _english(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.clip(np.asarray(x) ** 0.8, 0, 1))


def test_equipercentile_is_monotone_and_inverts_a_monotone_distortion() -> None:
    rng = np.random.default_rng(1)
    target = rng.random(5000)
    source = 0.1 + 0.3 * target**2
    q = equipercentile(source, target)
    assert np.all(np.diff(q.x) > 0) and np.all(np.diff(q.y) >= 0)
    assert q.x[0] == 0.0 and q.x[-1] == 1.0 and q.y[0] == 0.0 and q.y[-1] == 1.0
    assert np.abs(q(source) - target).max() < 0.01


def test_equating_reads_harmless_and_toxic_translations_like_their_english_texts() -> None:
    pairs = _pairs()
    eq = fit_equated(pairs, shrink=50.0)
    values = _english(eq(pairs.r_t, "de"))
    english = _english(pairs.r_e)
    harmless = pairs.h_t < 1.5
    assert abs(values[harmless].mean() - english[harmless].mean()) < 0.01
    assert abs(values[~harmless].mean() - english[~harmless].mean()) < 0.01
    # the regression it replaces (onto each English text's value, same mostly toxic sample) misses one end
    regression = fit_isotonic(pairs.r_t, english)(pairs.r_t)
    assert abs(regression[harmless].mean() - english[harmless].mean()) < 0.01  # noiseless: both fine here...
    noisy = _pairs(noise=0.1)
    eq_noisy = fit_equated(noisy, shrink=50.0)
    en_noisy = _english(noisy.r_e)
    reg_noisy = fit_isotonic(noisy.r_t, en_noisy)(noisy.r_t)
    h = noisy.h_t < 1.5
    gap_eq = _english(eq_noisy(noisy.r_t, "de"))[h].mean() - en_noisy[h].mean()
    gap_reg = reg_noisy[h].mean() - en_noisy[h].mean()
    # ...with a noisy ranking both lift the harmless end, the regression most (0.17 against 0.10 here)
    assert gap_reg > 0.12 and abs(gap_eq) < 0.65 * gap_reg, (gap_eq, gap_reg)


def test_only_toxicity_preserving_pairs_are_equated_and_shrinkage_blends() -> None:
    pairs = _pairs(600)
    toxic = pairs.subset(pairs.h_e >= 3)
    lost = Pairs(toxic.index, toxic.lang, np.zeros(len(toxic)), np.ones(len(toxic)), toxic.r_e,
                 toxic.h_e, toxic.persp)  # translations of toxic texts that lost it all, as their annotators say
    both = Pairs(*(np.concatenate([getattr(pairs, f), getattr(lost, f)])
                   for f in ("index", "lang", "r_t", "h_t", "r_e", "h_e", "persp")))
    assert both.preserving.sum() == pairs.preserving.sum() == len(pairs)
    assert np.allclose(fit_equated(both, 50.0)(pairs.r_t, "de"), fit_equated(pairs, 50.0)(pairs.r_t, "de"))
    assert abs(pairs.h_t - pairs.h_e).max() <= PRESERVING
    fr = Pairs(pairs.index, np.array(["fr"] * len(pairs), dtype=object), pairs.r_t**0.5, pairs.h_t, pairs.r_e,
               pairs.h_e, pairs.persp)
    mixed = Pairs(*(np.concatenate([getattr(pairs, f), getattr(fr, f)])
                    for f in ("index", "lang", "r_t", "h_t", "r_e", "h_e", "persp")))
    x = np.linspace(0, 1, 11)
    own, joint, middle = fit_equated(mixed, 0.0), fit_equated(mixed, float("inf")), fit_equated(mixed, 600.0)
    assert not np.allclose(own(x, "de"), joint(x, "de"))
    assert np.allclose(middle(x, "de"), 0.5 * own(x, "de") + 0.5 * joint(x, "de"))  # w = 600 / (600 + 600)
    assert np.allclose(own(x, "xx"), joint(x, "xx"))  # a language without pairs reads the joint map
    with pytest.raises(ValueError, match="no toxicity-preserving pairs"):
        fit_equated(lost, 50.0)


def test_checks_per_language_and_a_constant_fails_them() -> None:
    pairs = _pairs(800)
    english = _english(pairs.r_e)
    good = language_checks(pairs, english.copy(), english)["de"]
    assert good["harmless_diff"] == 0 and good["toxic_diff"] == 0 and good["harmless_share_diff"] == 0
    assert good["kappa"] == good["kappa_en"] and good["auc"] > 0.95
    constant = language_checks(pairs, np.full(len(pairs), np.median(english)), english)["de"]
    # a constant at the median of a mostly toxic sample passes the toxic check alone: the harmless end catches it
    assert abs(constant["harmless_diff"]) > 0.3 and abs(constant["toxic_diff"]) < 0.05
    assert constant["kappa"] == 0.0
    summary = summarise({"de": constant, "fr": good})
    assert summary["harmless_diff_max_abs"] == abs(constant["harmless_diff"])
    assert kappa(np.array([1, 2, 3, 4, 5]), np.array([0.0, 0.25, 0.5, 0.75, 1.0])) == 1.0
