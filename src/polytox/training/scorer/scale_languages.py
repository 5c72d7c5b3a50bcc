"""The other languages on an English scale: equipercentile maps over RTP-LX pairs, and their checks.

The principle: texts that readers of each language judge equally toxic read the same score, in the units
of the scale's English map. RTP-LX gives the pairs that state it: a translation and its English text share an
``Index``, and each side carries the mean of its own three Toxicity ratings (1-5).

**The data.** The head's held-out split only, where its raw outputs are out of sample as for any text a user
scores (``CHECK_SHARE``): a fit part for the maps and a check part for the measurement.

**The map** (``fit_equated``): on the *toxicity-preserving* pairs (the two sides' mean ratings at most
``PRESERVING`` apart: same content, same human judgement), the raw head output of the translations and of
their English texts describe the same texts, so equal quantiles mean equal toxicity. The equipercentile map
``q(r) = F_en^-1(F_lang(r))`` puts a language's raw output onto the English raw output, and the scale's
English map ``E`` then gives the value: ``E(q(r))``. Each language's own ``q`` is shrunk towards the joint
one over all other languages, ``w = n / (n + k)``. Quantile matching does not regress to the mean, so the
mostly toxic RTP-LX sample does not lift the harmless end, as a regression onto each source's Perspective
score would. The alternatives compared and the choice are in docs/scorer-scales.md ("One scale across
languages").

**The checks** (``language_checks``), per language, on pairs: harmless pairs' (both sides below 1.5) and
toxic pairs' (both 3 or more) mean and share >= 0.5 minus their English texts'; on preserving pairs whose
English text carries a 2020 Perspective score, the MAE to that score minus the English texts' own (and a
constant guess's MAE beside it); the human AUC (mean rating >= 3) and RTP-LX's agreement measure,
linear-weighted Cohen's kappa against the rounded mean rating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...constants import TOXIC_THRESHOLD
from ...errors import require
from ...scoring.calibration import IsotonicMap

PRESERVING = 0.5  # a pair preserves toxicity when its two mean ratings are at most this far apart
HARMLESS_BELOW, TOXIC_FROM = 1.5, 3.0  # mean Toxicity rating (1-5) of a harmless / a toxic text
# The pairs come from the head's held-out split: the raw outputs of its training rows are in-sample (the head
# was fitted on those very texts), and maps fitted on them do not transfer to held-out text.
# Its Index groups are cut once by hash: the maps are fitted on the fit part; the check part is read only by the
# measurement.
CHECK_SHARE = 0.3
MIN_OWN_PAIRS = 20  # a language gets its own (shrunk) quantile map with at least this many preserving pairs
QUANTILES = np.concatenate(
    [np.linspace(0.0, 0.1, 41), np.linspace(0.1, 0.9, 161)[1:], np.linspace(0.9, 1.0, 41)[1:]]
)  # denser in the tails, where the ends are decided


FIELDS = ("index", "lang", "r_t", "h_t", "r_e", "h_e", "persp")


@dataclass(frozen=True)
class Pairs:
    """RTP-LX pairs as columns: a translation (``lang``, raw ``r_t``, mean rating ``h_t``) and its English
    text (``r_e``, ``h_e``), their ``Index`` and the English text's 2020 Perspective score (NaN if none)."""

    index: np.ndarray
    lang: np.ndarray
    r_t: np.ndarray
    h_t: np.ndarray
    r_e: np.ndarray
    h_e: np.ndarray
    persp: np.ndarray

    def __len__(self) -> int:
        return len(self.r_t)

    @classmethod
    def concat(cls, *parts: Pairs) -> Pairs:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))

    def subset(self, mask: np.ndarray) -> Pairs:
        return Pairs(*(getattr(self, f)[mask] for f in FIELDS))

    @property
    def preserving(self) -> np.ndarray:
        return np.abs(self.h_t - self.h_e) <= PRESERVING

    @classmethod
    def build(
        cls, rows: Sequence[Any], raw: Mapping[tuple[str, str], float], persp: Mapping[str, float] | None = None
    ) -> Pairs:
        """Pairs from rows with ``text``, ``lang``, ``prompt`` (the Index group) and ``rating``: every
        non-English row whose English text is among ``rows`` and both sides have a raw output."""
        english = {r.prompt: r for r in rows if r.lang == "en" and (r.text, "en") in raw}
        cols: dict[str, list[Any]] = {k: [] for k in ("index", "lang", "r_t", "h_t", "r_e", "h_e", "persp")}
        for r in rows:
            e = english.get(r.prompt)
            if r.lang == "en" or e is None or (r.text, r.lang) not in raw:
                continue
            for key, value in (
                ("index", r.prompt),
                ("lang", r.lang),
                ("r_t", raw[(r.text, r.lang)]),
                ("h_t", r.rating),
                ("r_e", raw[(e.text, "en")]),
                ("h_e", e.rating),
                ("persp", (persp or {}).get(r.prompt, np.nan)),
            ):
                cols[key].append(value)
        return cls(
            *(
                np.asarray(cols[k], dtype=object if k in ("index", "lang") else float)
                for k in ("index", "lang", "r_t", "h_t", "r_e", "h_e", "persp")
            )
        )


def in_check_part(index: str) -> bool:
    """Whether an RTP-LX Index group (``lx:<Index>``) is in the check part of the held-out split."""
    from .pack import unit_hash

    return unit_hash(str(index), "lx-scale-check") < CHECK_SHARE


def equipercentile(source: np.ndarray, target: np.ndarray) -> IsotonicMap:
    """``F_target^-1(F_source(x))`` as a non-decreasing piecewise-linear map on [0, 1], ends pinned to 0
    and 1."""
    xs = np.concatenate([[0.0], np.quantile(source, QUANTILES), [1.0]])
    ys = np.concatenate([[0.0], np.quantile(target, QUANTILES), [1.0]])
    xs, first = np.unique(xs, return_index=True)
    ys = np.maximum.accumulate(ys[first])
    return IsotonicMap(tuple(xs.tolist()), tuple(ys.tolist()), len(source))


@dataclass(frozen=True)
class Equating:
    """Raw output of a language -> raw output of English: a joint quantile map and shrunk per-language ones."""

    joint: IsotonicMap
    own: Mapping[str, tuple[IsotonicMap, float]]  # lang -> (its own map, its weight)
    n_pairs: int
    n_by_lang: Mapping[str, int]
    shrink: float

    def __call__(self, raw: np.ndarray, lang: str) -> np.ndarray:
        q = self.joint(raw)
        if lang in self.own:
            fn, w = self.own[lang]
            q = w * fn(raw) + (1.0 - w) * q
        return q

    def breakpoints(self, lang: str | None) -> np.ndarray:
        """Where the map of ``lang`` (None: the joint map) bends."""
        own = self.own.get(lang or "")
        return np.unique(np.concatenate([self.joint.x, own[0].x if own else ()]))


def fit_equated(pairs: Pairs, shrink: float) -> Equating:
    """The equating of ``pairs``' toxicity-preserving pairs; ``shrink`` is ``k`` of ``w = n / (n + k)``
    (``inf``: the joint map for every language)."""
    keep = pairs.preserving
    if not keep.any():
        raise ValueError("no toxicity-preserving pairs to equate")
    joint = equipercentile(pairs.r_t[keep], pairs.r_e[keep])
    own: dict[str, tuple[IsotonicMap, float]] = {}
    counts: dict[str, int] = {}
    for lang in sorted(set(pairs.lang.tolist())):
        sel = keep & (pairs.lang == lang)
        counts[lang] = int(sel.sum())
        if np.isfinite(shrink) and counts[lang] >= MIN_OWN_PAIRS:
            own[lang] = (equipercentile(pairs.r_t[sel], pairs.r_e[sel]), counts[lang] / (counts[lang] + shrink))
    return Equating(joint, own, int(keep.sum()), counts, shrink)


def kappa(levels: np.ndarray, values: np.ndarray) -> float:
    """Linear-weighted Cohen's kappa between the annotators' level (mean rating rounded, 1-5) and the value
    read as a level (``1 + 4 * value`` rounded): RTP-LX's agreement measure for a 0-1 score."""
    metrics = require("sklearn.metrics", "ml", "scikit-learn")
    human = np.clip(np.rint(levels), 1, 5).astype(int)
    pred = np.clip(np.rint(1.0 + 4.0 * np.asarray(values, dtype=float)), 1, 5).astype(int)
    return float(metrics.cohen_kappa_score(human, pred, weights="linear", labels=[1, 2, 3, 4, 5]))


def _r(x: float) -> float | None:
    return round(float(x), 4) if np.isfinite(x) else None


def language_checks(pairs: Pairs, values: np.ndarray, english: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per language (module docstring): ``values`` of the translations and ``english`` of their English texts
    on the scale checked (English's own MAE, the baseline, is on that scale too)."""
    metrics = require("sklearn.metrics", "ml", "scikit-learn")
    out: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(pairs.lang.tolist())):
        sel = pairs.lang == lang
        v, e, ht, he = values[sel], english[sel], pairs.h_t[sel], pairs.h_e[sel]
        harmless = (ht < HARMLESS_BELOW) & (he < HARMLESS_BELOW)
        toxic = (ht >= TOXIC_FROM) & (he >= TOXIC_FROM)
        persp = pairs.persp[sel]
        anchored = pairs.subset(sel).preserving & np.isfinite(persp)
        row: dict[str, Any] = {
            "n": int(sel.sum()),
            "n_harmless": int(harmless.sum()),
            "n_toxic": int(toxic.sum()),
            "n_anchored": int(anchored.sum()),
        }
        for name, mask in (("harmless", harmless), ("toxic", toxic)):
            if mask.any():
                row[f"{name}_mean"] = _r(v[mask].mean())
                row[f"{name}_en"] = _r(e[mask].mean())
                row[f"{name}_diff"] = _r(v[mask].mean() - e[mask].mean())
                share, share_en = (v[mask] >= TOXIC_THRESHOLD).mean(), (e[mask] >= TOXIC_THRESHOLD).mean()
                row[f"{name}_share"] = _r(share)
                row[f"{name}_share_diff"] = _r(share - share_en)
        if anchored.any():
            row["mae"] = _r(np.abs(v[anchored] - persp[anchored]).mean())
            row["mae_en"] = _r(np.abs(e[anchored] - persp[anchored]).mean())
            row["mae_diff"] = _r(row["mae"] - row["mae_en"])
            row["mae_constant"] = _r(np.abs(np.median(persp[anchored]) - persp[anchored]).mean())
        label = ht >= TOXIC_FROM
        if 0 < label.sum() < len(label):
            row["auc"] = _r(metrics.roc_auc_score(label, pairs.r_t[sel]))
        row["kappa"] = _r(kappa(ht, v))
        row["kappa_en"] = _r(kappa(he, e))
        out[lang] = row
    return out


def summarise(by_lang: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Means and worst cases over the languages of ``language_checks``' rows."""

    def col(key: str) -> np.ndarray:
        return np.array([r[key] for r in by_lang.values() if r.get(key) is not None], dtype=float)

    out: dict[str, Any] = {}
    for key in ("harmless_diff", "toxic_diff", "mae_diff", "harmless_share_diff"):
        values = col(key)
        if len(values):
            out[f"{key}_mean_abs"] = _r(np.abs(values).mean())
            out[f"{key}_max_abs"] = _r(np.abs(values).max())
    for key in ("auc", "kappa"):
        values = col(key)
        if len(values):
            out[f"{key}_mean"] = _r(values.mean())
            out[f"{key}_min"] = _r(values.min())
    return out
