"""The quality table: per-language AUC against RTP-LX human labels, AUC and Pearson r against Perspective.

Every scorer in the table is measured on the same texts; for polytox-ml the predictions are out-of-fold
(the same grouped folds for each of its modes). A scorer that cannot score a language (the English SVM)
gets no value there, never a made-up one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import require
from .data import Example

# Issue 8's quality targets (per-language grouped-CV AUC against RTP-LX human labels; AUC against
# Perspective on RTP).
TARGET_MEAN_AUC = 0.85
TARGET_MIN_AUC = 0.75
TARGET_PERSPECTIVE_AUC = 0.95


def _auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    ok = ~np.isnan(scores)
    if ok.sum() < 2 or len(set(labels[ok].tolist())) < 2:
        return None
    metrics = require("sklearn.metrics", "ml")
    return float(metrics.roc_auc_score(labels[ok], scores[ok]))


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    ok = ~np.isnan(y)
    if ok.sum() < 3 or np.std(y[ok]) == 0 or np.std(x[ok]) == 0:
        return None
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def quality_table(examples: Sequence[Example], predictions: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Per language (RTP-LX) and RTP rows, for every scorer; plus the summary against the targets.

    A prediction array holds NaN where its scorer gave no score (unsupported language or an error).
    """
    source = np.array([e.source for e in examples])
    langs = np.array([e.lang for e in examples])
    labels = np.array([e.label for e in examples], dtype=bool)
    target = np.array([e.target for e in examples], dtype=np.float64)
    lx = source == "rtp-lx"
    rows: list[dict[str, Any]] = []
    for lang in sorted(set(langs[lx].tolist())):
        m = lx & (langs == lang)
        row: dict[str, Any] = {"lang": lang, "n": int(m.sum()), "n_toxic": int(labels[m].sum())}
        for name, pred in predictions.items():
            row[name] = _auc(labels[m], np.asarray(pred, dtype=np.float64)[m])
        rows.append(row)
    summary: dict[str, Any] = {}
    for name in predictions:
        values = [r[name] for r in rows if r[name] is not None]
        summary[name] = {
            "mean_auc": float(np.mean(values)) if values else None,
            "min_auc": float(min(values)) if values else None,
            "n_languages": len(values),
        }
    rtp: dict[str, Any] = {}
    m = source == "rtp"
    if m.any():
        rtp = {"n": int(m.sum()), "n_toxic": int(labels[m].sum())}
        for name, pred in predictions.items():
            p = np.asarray(pred, dtype=np.float64)[m]
            rtp[name] = {"auc": _auc(labels[m], p), "pearson_r": _pearson(target[m], p),
                         "n_scored": int((~np.isnan(p)).sum())}
    return {"languages": rows, "summary": summary, "rtp": rtp,
            "targets": {"mean_auc": TARGET_MEAN_AUC, "min_auc": TARGET_MIN_AUC,
                        "perspective_auc": TARGET_PERSPECTIVE_AUC}}


def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def markdown_table(table: Mapping[str, Any]) -> str:
    """The table as Markdown (docs/trainscorer.md and the CLI's ``--report``)."""
    names = list(table["summary"])
    lines = ["| language | n | toxic | " + " | ".join(names) + " |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in names) + " |"]
    for row in table["languages"]:
        lines.append(f"| {row['lang']} | {row['n']} | {row['n_toxic']} | "
                     + " | ".join(_fmt(row[n]) for n in names) + " |")
    lines.append("| **mean** | | | " + " | ".join(_fmt(table["summary"][n]["mean_auc"]) for n in names) + " |")
    lines.append("| **min** | | | " + " | ".join(_fmt(table["summary"][n]["min_auc"]) for n in names) + " |")
    rtp = table.get("rtp") or {}
    if rtp:
        lines.append(f"| RTP vs Perspective: AUC (n={rtp['n']}, {rtp['n_toxic']} >= 0.5) | | | "
                     + " | ".join(_fmt(rtp[n]["auc"]) for n in names) + " |")
        lines.append("| RTP vs Perspective: Pearson r | | | "
                     + " | ".join(_fmt(rtp[n]["pearson_r"]) for n in names) + " |")
    return "\n".join(lines)
