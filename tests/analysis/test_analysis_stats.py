"""The statistics against SciPy and hand computation."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats as sps

from polytox.analysis.stats import (
    cohen_d,
    describe,
    effect_label,
    expected_max_of_k,
    pearson,
    prob_any_of_k,
    welch_t,
)


def _pooled_d(a: list[float], b: list[float]) -> float:
    """Cohen's d written out by hand: pooled variance from the sums of squares."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    ssa = sum((x - ma) ** 2 for x in a)
    ssb = sum((x - mb) ** 2 for x in b)
    return (ma - mb) / math.sqrt((ssa + ssb) / (len(a) + len(b) - 2))


@pytest.mark.parametrize("na,nb,seed", [(2, 2, 0), (5, 9, 1), (40, 25, 2), (300, 31, 3)])
def test_cohen_d_and_welch_match_hand_and_scipy(na: int, nb: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.beta(2, 5, na).tolist()
    b = (rng.beta(2, 3, nb) * 0.9).tolist()
    assert cohen_d(a, b) == pytest.approx(_pooled_d(a, b), rel=1e-12)
    ours = welch_t(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert ours is not None
    assert ours.t == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-8)
    assert ours.df == pytest.approx(ref.df, rel=1e-10)


def test_statistics_are_undefined_not_zero() -> None:
    assert cohen_d([0.5], [0.1, 0.2]) is None  # n < 2
    assert cohen_d([0.3, 0.3], [0.3, 0.3]) is None  # zero variance
    assert welch_t([0.1], [0.2, 0.3]) is None
    assert welch_t([0.2, 0.2], [0.2, 0.2]) is None
    assert pearson([0.1, 0.2], [0.3, 0.4]) is None  # n < 3
    assert pearson([0.1, 0.1, 0.1], [0.3, 0.4, 0.5]) is None  # constant
    s = describe([float("nan"), 0.5])
    assert (s.n, s.mean, s.std) == (1, 0.5, None)
    assert describe([]).mean is None
    assert effect_label(None) == "n/a"
    assert [effect_label(d) for d in (0.1, -0.3, 0.6, -1.2)] == ["negligible", "small", "medium", "large"]


@pytest.mark.parametrize("n,seed", [(3, 0), (10, 1), (200, 2), (5000, 3)])
def test_pearson_matches_scipy(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    y = 0.4 * x + rng.random(n) * 0.6
    ours = pearson(x, y)
    ref = sps.pearsonr(x, y)
    assert ours is not None and ours.n == n
    assert ours.r == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-300)


def test_pearson_drops_incomplete_pairs() -> None:
    x = [0.1, 0.5, float("nan"), 0.9, 0.3]
    y = [0.2, 0.4, 0.8, float("nan"), 0.1]
    ours = pearson(x, y)
    ref = sps.pearsonr([0.1, 0.5, 0.3], [0.2, 0.4, 0.1])
    assert ours is not None and ours.n == 3
    assert ours.r == pytest.approx(ref.statistic)
    assert ours.p == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_expected_max_and_probability_over_k_subsets_by_enumeration(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.random(n).round(3).tolist()
    threshold = 0.5
    for k in range(1, n + 1):
        subsets = list(combinations(values, k))
        assert expected_max_of_k(values, k) == pytest.approx(np.mean([max(s) for s in subsets]))
        m = sum(v >= threshold for v in values)
        assert prob_any_of_k(n, m, k) == pytest.approx(
            np.mean([any(v >= threshold for v in s) for s in subsets])
        )
    assert expected_max_of_k(values, 1) == pytest.approx(np.mean(values))
    assert expected_max_of_k(values, n) == pytest.approx(max(values))
    assert expected_max_of_k(values, n + 1) is None
    assert prob_any_of_k(n, 0, n + 1) is None
