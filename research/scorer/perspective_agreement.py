"""How well Perspective itself agrees with the RTP-LX annotators, and what a scale that reads every translation
exactly as Perspective read its English source would score on issue 61's kappa and AUC targets (a
diagnostic: it fits no scale and decides nothing; log.md "Perspective against the RTP-LX annotators").

Issue 61 asks for two things at once: a translation should read like its English source on a Perspective
scale, and the values, cut into RTP-LX's five levels, should agree with each language's annotators at linear
kappa >= 0.55. This module measures the reading that meets the first ask perfectly. For every RTP-LX row
whose English prompt carries a Perspective score (``scale_rows``' anchored rows, by the score's era), the
*Perspective reading* of the row is its English source's score: for English rows, Perspective's own score
of that text; for a translation, the value a perfect "reads like English" scale would give it.

Against the row's own annotators (mean Toxicity rating, 1-5), per language:
- ``kappa_fixed``: RTP-LX's linear-weighted kappa with the value read as the level ``1 + 4v``, rounded;
- ``kappa_fitted``: the same with cut points fitted (``everyday_trial.level_cuts``) on the other four of five
  folds of the language's rows, grouped by ``Index``, so no row's cuts saw it;
- ``auc``: the human label (mean rating >= 3) against the value;
- beside it, the shipped head on the same rows and scale (``head``: every row; ``head_heldout``: the head's
  held-out split only, the rows no fitted part saw), and a constant guess (the median Perspective reading);
- ``head_vs_perspective``: the head's MAE to the Perspective reading and its mean signed difference, on all
  rows and apart on the rows the language's annotators rate level 1-2 and level 3-5: where the head's distance
  from Perspective comes from.

    python -m research.scorer.perspective_agreement
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from polytox.training.scorer.scale_languages import kappa
from polytox.training.scorer.scale_rows import ERA_2020, RATERS, ScaleRow, scale_rows

from .everyday_trial import level_cuts

RESULT = Path(__file__).resolve().parent / "results" / "perspective-agreement.json"
FOLDS = 5
READERS = ("perspective", "head", "head_heldout", "constant")
LOW_LEVELS_BELOW = 2.5  # a mean rating that rounds to level 1 or 2


@dataclass(frozen=True)
class Rated:
    """The RTP-LX rows of one language that carry an anchor of one era: text, ``Index``, mean rating, the
    English source's Perspective score and whether the row is in the head's held-out split."""

    text: list[str]
    index: np.ndarray
    rating: np.ndarray
    persp: np.ndarray
    heldout: np.ndarray


def rated_rows(rows: Sequence[ScaleRow], era: str) -> dict[str, Rated]:
    """Per language, the rows with both a rating (``raters``) and an ``anchor:<era>`` score."""
    rating = {(r.text, r.lang): r for r in rows if r.target == RATERS and r.rating is not None}
    acc: dict[str, list[tuple[str, str, float, float, bool]]] = {}
    for r in rows:
        rated = rating.get((r.text, r.lang))
        if r.target == f"anchor:{era}" and rated is not None and rated.rating is not None:
            acc.setdefault(r.lang, []).append((r.text, r.prompt, float(rated.rating), r.value, r.heldout))
    out: dict[str, Rated] = {}
    for lang, items in sorted(acc.items()):
        items.sort(key=lambda x: (x[1], x[0]))
        out[lang] = Rated(
            [x[0] for x in items],
            np.array([x[1] for x in items]),
            np.array([x[2] for x in items]),
            np.array([x[3] for x in items]),
            np.array([x[4] for x in items], dtype=bool),
        )
    return out


def fold_of(index: np.ndarray, folds: int = FOLDS) -> np.ndarray:
    """A fixed fold per ``Index`` (its rank among the sorted distinct ones, modulo ``folds``)."""
    distinct = {k: i % folds for i, k in enumerate(sorted(set(index.tolist())))}
    return np.array([distinct[k] for k in index.tolist()])


def cross_fitted_kappa(ratings: np.ndarray, values: np.ndarray, folds: np.ndarray) -> float | None:
    """Kappa with each fold's cut points fitted on the other folds (``level_cuts``), pooled over the folds."""
    from sklearn.metrics import cohen_kappa_score

    if len(set(folds.tolist())) < 2:
        return None
    pred = np.zeros(len(values), dtype=int)
    for f in sorted(set(folds.tolist())):
        out = folds == f
        pred[out] = 1 + np.searchsorted(level_cuts(values[~out], ratings[~out]), values[out], side="right")
    human = np.clip(np.rint(ratings), 1, 5).astype(int)
    return round(float(cohen_kappa_score(human, pred, weights="linear", labels=[1, 2, 3, 4, 5])), 4)


def agreement(ratings: np.ndarray, values: np.ndarray, index: np.ndarray) -> dict[str, Any]:
    """The module docstring's three measures of ``values`` against ``ratings`` (None where undefined)."""
    from sklearn.metrics import roc_auc_score

    label = ratings >= 3
    both = 0 < label.sum() < len(label)
    return {
        "n": len(values),
        "kappa_fixed": round(kappa(ratings, values), 4) if len(values) else None,
        "kappa_fitted": cross_fitted_kappa(ratings, values, fold_of(index)),
        "auc": round(float(roc_auc_score(label, values)), 4) if both else None,
    }


def versus(values: np.ndarray, persp: np.ndarray, ratings: np.ndarray) -> dict[str, Any]:
    """MAE and mean signed difference of ``values`` from the Perspective reading, on all rows and apart on
    those rated level 1-2 (``low``) and 3-5 (``high``) by their annotators."""
    d = values - persp
    low = ratings < LOW_LEVELS_BELOW

    def mean(x: np.ndarray) -> float | None:
        return round(float(x.mean()), 4) if len(x) else None

    return {
        "mae": mean(np.abs(d)),
        "diff": mean(d),
        "n_low": int(low.sum()),
        "diff_low": mean(d[low]),
        "diff_high": mean(d[~low]),
    }


def measure(
    by_lang: dict[str, Rated], head: Callable[[list[str], str], np.ndarray] | None
) -> dict[str, dict[str, Any]]:
    """Per language and reader (``READERS``): ``agreement`` of each reading with the rows' annotators, and
    with a ``head``, its distance from the Perspective reading (``versus``)."""
    out: dict[str, dict[str, Any]] = {}
    for lang, d in by_lang.items():
        row: dict[str, Any] = {
            "n_heldout": int(d.heldout.sum()),
            "perspective": agreement(d.rating, d.persp, d.index),
            "constant": agreement(d.rating, np.full(len(d.persp), float(np.median(d.persp))), d.index),
        }
        if head is not None:
            v = head(d.text, lang)
            row["head"] = agreement(d.rating, v, d.index)
            h = d.heldout
            row["head_heldout"] = agreement(d.rating[h], v[h], d.index[h])
            row["perspective_heldout"] = agreement(d.rating[h], d.persp[h], d.index[h])
            row["head_vs_perspective"] = versus(v, d.persp, d.rating)
        out[lang] = row
    return out


def summary(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Means over languages (all, and the non-English ones) of each reader's measures."""
    out: dict[str, Any] = {}
    for key in ("mae", "diff", "diff_low", "diff_high"):
        for name, langs in (("all", list(rows)), ("other", [k for k in rows if k != "en"])):
            vals = [rows[k]["head_vs_perspective"][key] for k in langs if "head_vs_perspective" in rows[k]]
            if vals:
                out[f"head_vs_perspective.{key}.{name}"] = round(float(np.mean([v for v in vals if v is not None])), 4)
    for reader in (*READERS, "perspective_heldout"):
        for key in ("kappa_fixed", "kappa_fitted", "auc"):
            for name, langs in (("all", list(rows)), ("other", [k for k in rows if k != "en"])):
                vals = [rows[k][reader][key] for k in langs if reader in rows[k] and rows[k][reader][key] is not None]
                if vals:
                    out[f"{reader}.{key}.{name}"] = round(float(np.mean(vals)), 4)
    return out


def head_reader(scale: str) -> Callable[[list[str], str], np.ndarray]:
    """The shipped default scorer on ``scale``, through ``polytox.score`` (its cache and language handling)."""
    import polytox

    def read(texts: list[str], lang: str) -> np.ndarray:
        scored = polytox.score(texts, langs=lang, options={"scale": scale})
        bad = [s.error for s in scored if s.value is None]
        if bad:
            raise RuntimeError(f"{len(bad)} {lang} texts failed to score: {bad[0]}")
        return np.array([float(s.value) for s in scored if s.value is not None])

    return read


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--era", default=ERA_2020, help="the anchors' Perspective era (the scale the head is read on)")
    p.add_argument("--no-head", action="store_true", help="Perspective and the constant only")
    p.add_argument("--out", default=str(RESULT))
    args = p.parse_args(argv)
    rows = measure(rated_rows(scale_rows(args.shared), args.era), None if args.no_head else head_reader(args.era))
    result = {"era": args.era, "folds": FOLDS, "languages": rows, "summary": summary(rows)}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("| lang | n (held out) | Perspective kappa fixed / fitted, AUC | head | head, held out | constant |")
    print("| --- | --- | --- | --- | --- | --- |")
    for lang, r in rows.items():
        cells = []
        for reader in READERS:
            a = r.get(reader)
            cells.append(
                "-" if a is None else f"{_fmt(a['kappa_fixed'])} / {_fmt(a['kappa_fitted'])}, {_fmt(a['auc'])}"
            )
        print(f"| {lang} | {r['perspective']['n']} ({r['n_heldout']}) | " + " | ".join(cells) + " |")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
