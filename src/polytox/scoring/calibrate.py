"""Fit a calibration from a local scorer onto a reference, and measure it on held-out data.

The split is by group (the row id by default; RTP-LX's ``Index``, so translations of one prompt never
straddle it), chosen by a seeded hash, so it is stable across runs and machines. The map is fitted on the
training part only and reported on the held-out part: MAE, AUC (against the reference's toxic label),
Pearson r and the toxic rate, before and after, overall and per language.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import constants as C
from ..errors import PolytoxError
from .agreement import labels, roc_auc
from .calibration import Calibration, fit_calibration


def held_out(groups: Sequence[str], share: float, seed: int) -> np.ndarray:
    """Boolean mask: True for rows whose group falls in the held-out share (seeded hash of the group)."""

    def unit(g: str) -> float:
        digest = hashlib.blake2b(f"{seed}\x1f{g}".encode("utf-8", "backslashreplace"), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    return np.array([unit(g) < share for g in groups], dtype=bool)


def _metrics(pred: np.ndarray, ref: np.ndarray, threshold: float, comparison: str) -> dict[str, Any]:
    n = int(pred.size)
    if n == 0:
        return {"n": 0}
    r = float(np.corrcoef(pred, ref)[0, 1]) if n >= 3 and pred.std() > 0 and ref.std() > 0 else None
    return {
        "n": n,
        "mae": float(np.abs(pred - ref).mean()),
        "auc": roc_auc(pred, labels(ref, threshold, comparison)),
        "pearson": r,
        "mean": float(pred.mean()),
        "mean_reference": float(ref.mean()),
        "toxic_rate": float(labels(pred, threshold, comparison).mean()),
        "toxic_rate_reference": float(labels(ref, threshold, comparison).mean()),
    }


def evaluate_calibration(
    cal: Calibration,
    x: np.ndarray,
    y: np.ndarray,
    langs: Sequence[str],
    threshold: float = C.TOXIC_THRESHOLD,
    comparison: str = C.DEFAULT_COMPARISON,
    min_per_lang: int = 10,
) -> dict[str, Any]:
    """Before/after metrics of ``cal`` on pairs (x = local score, y = reference), overall and by language."""
    after = cal.apply(x, langs)
    out: dict[str, Any] = {
        "overall": {
            "before": _metrics(x, y, threshold, comparison),
            "after": _metrics(after, y, threshold, comparison),
        },
        "by_lang": {},
    }
    lang_arr = np.asarray(langs, dtype=object)
    for lang in sorted(set(langs)):
        sel = lang_arr == lang
        if int(sel.sum()) >= min_per_lang:
            out["by_lang"][lang] = {
                "map": "own" if lang in cal.per_lang else "global",
                "before": _metrics(x[sel], y[sel], threshold, comparison),
                "after": _metrics(after[sel], y[sel], threshold, comparison),
            }
    return out


def calibrate(
    x: Sequence[float | None],
    y: Sequence[float | None],
    langs: Sequence[str | None],
    groups: Sequence[str],
    *,
    scorer: str,
    reference: str,
    attribute: str = "toxicity",
    holdout: float = 0.2,
    seed: int = 0,
    min_per_lang: int = 200,
    threshold: float = C.TOXIC_THRESHOLD,
    comparison: str = C.DEFAULT_COMPARISON,
) -> Calibration:
    """Fit on the training part, report on the held-out part; the report is stored in the calibration."""
    if not 0.0 < holdout < 1.0:
        raise PolytoxError(f"holdout must be in (0, 1), got {holdout}")
    xv = np.array([np.nan if v is None else v for v in x], dtype=float)
    yv = np.array([np.nan if v is None else v for v in y], dtype=float)
    ok = ~np.isnan(xv) & ~np.isnan(yv)
    test = held_out(groups, holdout, seed)
    lang_list = np.array([lang or "?" for lang in langs], dtype=object)
    train_sel, test_sel = ok & ~test, ok & test
    if int(train_sel.sum()) < 10 or int(test_sel.sum()) < 10:
        raise PolytoxError(
            f"too few complete pairs to calibrate: {int(train_sel.sum())} for fitting and "
            f"{int(test_sel.sum())} held out (need at least 10 each)"
        )
    cal = fit_calibration(
        xv[train_sel],
        yv[train_sel],
        list(lang_list[train_sel]),
        scorer=scorer,
        reference=reference,
        attribute=attribute,
        min_per_lang=min_per_lang,
    )
    report = {
        "n_pairs": int(ok.sum()),
        "n_missing": int((~ok).sum()),
        "n_train": int(train_sel.sum()),
        "n_heldout": int(test_sel.sum()),
        "holdout": holdout,
        "seed": seed,
        "min_per_lang": min_per_lang,
        "threshold": threshold,
        "comparison": comparison,
        "heldout": evaluate_calibration(
            cal, xv[test_sel], yv[test_sel], list(lang_list[test_sel]), threshold, comparison
        ),
    }
    return Calibration(cal.scorer, cal.reference, cal.attribute, cal.global_map, cal.per_lang, report)
