"""Group bootstrap CIs of the scorer card's agreement numbers (AUC, MAE, share >= 0.5 difference).

The held-out split is drawn by joined group (a prompt with its continuations, an RTP-LX Index with all its
translations, a model prompt with every model's generations), so the unit of sampling is the group, not the
text: rows of one group are not independent. Each resample draws the groups with replacement and gives
every row its group's draw count as a weight; every statistic is then a weighted one, computed for all
resamples at once (one sort per slice, one sparse product per statistic).

The interval says how far a number could move with another held-out sample of the same kind. It is what
tells a target missed by 0.007 on 12 toxic texts apart from one missed by a wide margin.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...constants import BOOTSTRAP_RESAMPLES, CI_LEVEL
from ...errors import require


def group_weights(groups: Sequence[str] | np.ndarray, n_boot: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> np.ndarray:
    """(n_boot, rows) float32 weights: each row's group's draw count in each resample of the groups."""
    _, inverse = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    n_groups = int(inverse.max()) + 1 if len(inverse) else 0
    if n_groups == 0 or n_boot <= 0:
        return np.zeros((max(n_boot, 0), len(inverse)), dtype=np.float32)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    counts = np.stack([np.bincount(d, minlength=n_groups) for d in draws]).astype(np.float32)
    return counts[:, inverse]


def weighted_auc(labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC AUC of ``scores`` for binary ``labels`` under each row of ``weights`` (n_boot, rows); ties count
    one half, as in scikit-learn's ``roc_auc_score(..., sample_weight=w)``. NaN where a resample has no
    positive or no negative weight."""
    sparse = require("scipy.sparse", "ml")  # scikit-learn's own dependency
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    y = np.asarray(labels, dtype=bool)
    _, block = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
    n_blocks = int(block.max()) + 1 if len(block) else 0
    if n_blocks == 0:
        return np.full(len(w), np.nan)

    def per_block(mask: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(mask)
        indicator = sparse.csr_matrix((np.ones(len(rows)), (rows, block[rows])), shape=(len(y), n_blocks))
        return np.asarray((indicator.T @ w.T).T)  # (n_boot, n_blocks): weight of this class per score value

    pos, neg = per_block(y), per_block(~y)
    below = np.cumsum(neg, axis=1) - neg  # negative weight strictly below each score value
    numerator = (pos * (below + 0.5 * neg)).sum(axis=1)
    denominator = pos.sum(axis=1) * neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted mean of ``values`` under each row of ``weights``; NaN where a resample has no weight."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (w @ np.asarray(values, dtype=np.float64)) / np.where(total > 0, total, 1.0), np.nan)


def percentile_ci(resampled: np.ndarray, level: float = CI_LEVEL) -> list[float | None]:
    """The percentile interval of bootstrap values (NaN resamples left out); [None, None] if none is finite."""
    finite = np.asarray(resampled, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return [None, None]
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return [round(float(lo), 4), round(float(hi), 4)]
