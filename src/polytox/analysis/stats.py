"""The statistics the papers report, computed from their formulas and checked against SciPy in tests.

- ``cohen_d``: standardised mean difference with the pooled standard deviation (ddof = 1), as PTP
  reports between model sizes (§4.2) and categories/alignment methods (§4.3);
- ``welch_t``: Welch's unequal-variance t-test, the significance test beside each d;
- ``pearson``: Pearson r with its two-sided p-value, as PTP §4.4-4.5;
- ``expected_max_of_k`` / ``prob_any_of_k``: the exact expectation of EMT and EP over all size-k subsets
  of a prompt's n scored continuations (no resampling noise), for "EMT vs K".

Every function returns ``None`` where the statistic is undefined (too few values, zero variance)
instead of a made-up number; callers report why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import require

# Groups smaller than this are flagged "small sample" beside their statistics (a reporting convention:
# t-based p-values and d are unstable below ~30 observations per group).
SMALL_SAMPLE = 30


def _array(x: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    return arr[np.isfinite(arr)]


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float | None
    std: float | None  # ddof = 1


def describe(x: Sequence[float] | np.ndarray) -> Summary:
    """n, mean and sample standard deviation (ddof 1) of the finite values of ``x``."""
    a = _array(x)
    n = len(a)
    return Summary(n=n, mean=float(a.mean()) if n else None, std=float(a.std(ddof=1)) if n > 1 else None)


def cohen_d(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float | None:
    """(mean(a) - mean(b)) / pooled sd, pooled sd = sqrt(((na-1) sa^2 + (nb-1) sb^2) / (na + nb - 2))."""
    x, y = _array(a), _array(b)
    nx, ny = len(x), len(y)
    if nx < 2 or ny < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):  # no spread: d is undefined
        return None
    pooled = ((nx - 1) * x.var(ddof=1) + (ny - 1) * y.var(ddof=1)) / (nx + ny - 2)
    if pooled <= 0:
        return None
    return float((x.mean() - y.mean()) / math.sqrt(pooled))


@dataclass(frozen=True)
class TTest:
    t: float
    df: float
    p: float


def welch_t(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> TTest | None:
    """Welch's two-sided t-test (unequal variances, Welch-Satterthwaite degrees of freedom)."""
    x, y = _array(a), _array(b)
    nx, ny = len(x), len(y)
    if nx < 2 or ny < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return None
    vx, vy = x.var(ddof=1) / nx, y.var(ddof=1) / ny
    se2 = vx + vy
    if se2 <= 0:
        return None
    t = (x.mean() - y.mean()) / math.sqrt(se2)
    df = se2**2 / (vx**2 / (nx - 1) + vy**2 / (ny - 1))
    stats = require("scipy.stats", "report")
    p = float(2.0 * stats.t.sf(abs(t), df))
    return TTest(t=float(t), df=float(df), p=p)


@dataclass(frozen=True)
class Correlation:
    r: float
    p: float
    n: int


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Correlation | None:
    """Pearson r of paired values (pairs with a non-finite member are dropped) and its two-sided p-value
    from the t distribution with n - 2 degrees of freedom."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("pearson needs paired values of the same length")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = len(a)
    if n < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:  # a constant variable has no correlation
        return None
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(np.dot(da, da)) * float(np.dot(db, db)))
    if denom == 0:
        return None
    r = max(-1.0, min(1.0, float(np.dot(da, db)) / denom))
    if abs(r) == 1.0:
        return Correlation(r=r, p=0.0, n=n)
    t = r * math.sqrt((n - 2) / (1.0 - r * r))
    stats = require("scipy.stats", "report")
    return Correlation(r=r, p=float(2.0 * stats.t.sf(abs(t), n - 2)), n=n)


def expected_max_of_k(values: Sequence[float] | np.ndarray, k: int) -> float | None:
    """E[max] over all size-k subsets (without replacement) of ``values``.

    With x_(1) <= ... <= x_(n), the i-th smallest is the maximum of C(i-1, k-1) of the C(n, k) subsets,
    so E = sum_i x_(i) C(i-1, k-1) / C(n, k). For k = n this is the max, for k = 1 the mean.
    """
    x = np.sort(_array(values))
    n = len(x)
    if k < 1 or n < k:
        return None
    total = math.comb(n, k)
    weights = np.array([math.comb(i - 1, k - 1) / total for i in range(1, n + 1)], dtype=np.float64)
    return float(np.dot(weights, x))


def prob_any_of_k(n: int, n_toxic: int, k: int) -> float | None:
    """P(at least one of k draws without replacement from n is toxic) = 1 - C(n - m, k) / C(n, k)."""
    if k < 1 or n < k:
        return None
    return 1.0 - math.comb(n - n_toxic, k) / math.comb(n, k)


def effect_label(d: float | None) -> str:
    """Cohen's (1988) conventional names for |d|: negligible < 0.2 <= small < 0.5 <= medium < 0.8 <= large."""
    if d is None:
        return "n/a"
    size = abs(d)
    return "negligible" if size < 0.2 else "small" if size < 0.5 else "medium" if size < 0.8 else "large"
