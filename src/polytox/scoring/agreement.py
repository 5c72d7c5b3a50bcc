"""Agreement between two toxicity scorers (or a scorer and stored reference scores).

For paired scores ``a`` (the scorer under study) and ``b`` (the reference): Pearson and Spearman
correlation, ROC AUC of ``a`` against the reference's toxic label (``b >= threshold``), the confusion
matrix of both labels at the threshold, mean absolute error, and the texts where the two disagree most in
each direction (PTP §4.4 and Appendix E, Table 5). Pairs where either side has no score are left out and
counted, never filled with 0.

scipy is needed for correlations (``pip install 'polytox[analysis]'``); AUC is the Mann-Whitney statistic
with average ranks for ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import constants as C
from ..errors import require


def _scipy_stats() -> Any:
    return require("scipy.stats", "analysis")


def labels(values: np.ndarray, threshold: float, comparison: str = C.DEFAULT_COMPARISON) -> np.ndarray:
    return values >= threshold if comparison == ">=" else values > threshold


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve (probability a positive outranks a negative; ties count half).

    None when one class is absent (the AUC is undefined, not 0.5).
    """
    n_pos = int(positive.sum())
    n_neg = int(positive.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _scipy_stats().rankdata(scores)
    u = float(ranks[positive].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def confusion(a: np.ndarray, b: np.ndarray, threshold: float, comparison: str = C.DEFAULT_COMPARISON) -> dict[str, Any]:
    """Confusion matrix of ``a``'s toxic label against the reference ``b``'s, plus the usual rates."""
    pa, pb = labels(a, threshold, comparison), labels(b, threshold, comparison)
    tp, fp = int((pa & pb).sum()), int((pa & ~pb).sum())
    fn, tn = int((~pa & pb).sum()), int((~pa & ~pb).sum())
    n = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    accuracy = (tp + tn) / n if n else None
    expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n) if n else None
    kappa = ((accuracy - expected) / (1 - expected)) if accuracy is not None and expected not in (None, 1.0) else None
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "accuracy": accuracy,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "cohen_kappa": kappa,
        "toxic_rate_a": (tp + fp) / n if n else None,
        "toxic_rate_b": (tp + fn) / n if n else None,
    }


def pair_stats(
    a: np.ndarray, b: np.ndarray, threshold: float = C.TOXIC_THRESHOLD, comparison: str = C.DEFAULT_COMPARISON
) -> dict[str, Any]:
    """All agreement numbers for paired, complete scores."""
    n = int(a.size)
    out: dict[str, Any] = {
        "n": n,
        "mean_a": float(a.mean()) if n else None,
        "mean_b": float(b.mean()) if n else None,
        "mae": float(np.abs(a - b).mean()) if n else None,
    }
    if n >= 3 and float(a.std()) > 0 and float(b.std()) > 0:
        stats = _scipy_stats()
        pr, spr = stats.pearsonr(a, b), stats.spearmanr(a, b)
        out.update(pearson=float(pr[0]), pearson_p=float(pr[1]), spearman=float(spr[0]), spearman_p=float(spr[1]))
    else:
        out.update(pearson=None, pearson_p=None, spearman=None, spearman_p=None)
    out["auc"] = roc_auc(a, labels(b, threshold, comparison)) if n else None
    out["confusion"] = confusion(a, b, threshold, comparison)
    return out


def disagreements(a: np.ndarray, b: np.ndarray, index: np.ndarray, top: int) -> dict[str, list[int]]:
    """Row indices of the ``top`` largest ``a - b`` (a says toxic, b not) and ``b - a`` differences."""
    diff = a - b
    order = np.argsort(-diff, kind="stable")
    high = [int(index[i]) for i in order[:top] if diff[i] > 0]
    low = [int(index[i]) for i in order[::-1][:top] if diff[i] < 0]
    return {"a_high_b_low": high, "a_low_b_high": low}


def compare(
    a: Sequence[float | None],
    b: Sequence[float | None],
    langs: Sequence[str | None],
    threshold: float = C.TOXIC_THRESHOLD,
    comparison: str = C.DEFAULT_COMPARISON,
    top: int = 10,
    min_per_lang: int = 10,
) -> dict[str, Any]:
    """Overall and per-language agreement; rows missing on either side are counted, not scored.

    ``disagreements`` hold row indices into the inputs (callers attach ids and texts).
    """
    av = np.array([np.nan if x is None else x for x in a], dtype=float)
    bv = np.array([np.nan if x is None else x for x in b], dtype=float)
    if av.shape != bv.shape or av.size != len(langs):
        raise ValueError("a, b and langs must have the same length")
    ok = ~np.isnan(av) & ~np.isnan(bv)
    idx = np.flatnonzero(ok)
    report: dict[str, Any] = {
        "threshold": threshold,
        "comparison": comparison,
        "n_rows": int(av.size),
        "n_missing_a": int(np.isnan(av).sum()),
        "n_missing_b": int(np.isnan(bv).sum()),
        "overall": pair_stats(av[ok], bv[ok], threshold, comparison),
        "disagreements": disagreements(av[ok], bv[ok], idx, top),
        "by_lang": {},
    }
    lang_arr = np.array([x or "" for x in langs], dtype=object)
    for lang in sorted({x for x in lang_arr[ok]}):
        sel = ok & (lang_arr == lang)
        if int(sel.sum()) >= min_per_lang:
            report["by_lang"][lang or "?"] = pair_stats(av[sel], bv[sel], threshold, comparison)
        else:
            report["by_lang"][lang or "?"] = {"n": int(sel.sum()), "note": f"fewer than {min_per_lang} pairs"}
    return report
