"""Per-language maps fitted straight onto a scale, anchored at both ends and smooth.

The equipercentile maps (``scale_languages``) match a language's whole distribution of raw outputs to
English's. Harmless web prompts that sit between the everyday anchors at the bottom and the toxic pairs at
the top then read where the mixture puts them, not where their English sources read, and a stretch of equal
quantiles becomes a flat step that lifts a band of short sentences together. Here each language's map is
fitted on what the issue measures, anchor by anchor:

- **Anchors**, in strata that carry equal weight in a language (``STRATA``): the fit part's Parallel UD ids
  (everyday), RTP-LX pairs rated harmless on both sides, toxic pairs and the other toxicity-preserving pairs
  (the middle), each a translation's raw output with its English text's raw output; and, optionally, other
  everyday sentences (fiction, legal, reviews) without an English twin, paired with English's by quantile.
- **Target**: the English text's value on the scale (the scale's English map ``E`` of its raw output), so a
  translation reads what its source reads, at every level.
- **Form**: monotone piecewise-linear from the raw output to the value, knots at the language's raw
  quantiles, every slope at least ``MIN_SLOPE`` (no flat step), fitted by weighted least squares with
  non-negative increments (``scipy.optimize.nnls``). The other languages' anchors join at ``JOINT_WEIGHT``
  of a language's own weight, so a language with few anchors leans on the joint fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import require
from ...scoring.calibration import IsotonicMap
from .everyday import EverydayRow
from .scale_languages import HARMLESS_BELOW, TOXIC_FROM, Pairs

MIN_SLOPE = 0.1  # value per unit of raw output: the flattest a map may be anywhere
JOINT_WEIGHT = 0.25  # the other languages' anchors, together, against a language's own
KNOTS = np.linspace(0.0, 1.0, 11)  # at these quantiles of a language's own anchors' raw outputs
OTHER_QUANTILES = np.linspace(0.0, 1.0, 21)  # unpaired sentences are paired with English's at these
EVERYDAY, HARMLESS, TOXIC, MIDDLE, OTHER = "everyday", "harmless", "toxic", "middle", "other"
STRATA = (EVERYDAY, HARMLESS, TOXIC, MIDDLE, OTHER)


@dataclass(frozen=True)
class Anchors:
    """Columns of anchors: a language, its raw output, the English raw output it should read as, a stratum."""

    lang: np.ndarray
    raw: np.ndarray
    english: np.ndarray
    stratum: np.ndarray

    def __len__(self) -> int:
        return len(self.raw)

    @classmethod
    def concat(cls, *parts: Anchors) -> Anchors:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("lang", "raw", "english", "stratum")))

    @classmethod
    def from_pairs(cls, pairs: Pairs, everyday: bool = False) -> Anchors:
        """RTP-LX pairs by stratum (non-preserving pairs that are not harmless on both sides are left out),
        or every pair as ``everyday`` (``everyday.everyday_pairs``)."""
        if everyday:
            stratum = np.full(len(pairs), EVERYDAY, dtype=object)
        else:
            harmless = (pairs.h_t < HARMLESS_BELOW) & (pairs.h_e < HARMLESS_BELOW)
            toxic = (pairs.h_t >= TOXIC_FROM) & (pairs.h_e >= TOXIC_FROM) & pairs.preserving
            stratum = np.where(harmless, HARMLESS, np.where(toxic, TOXIC, np.where(pairs.preserving, MIDDLE, "")))
        keep = stratum != ""
        return cls(pairs.lang[keep].astype(object), pairs.r_t[keep], pairs.r_e[keep], stratum[keep].astype(object))

    @classmethod
    def from_unpaired(cls, rows: Sequence[EverydayRow], raw: Mapping[tuple[str, str], float]) -> Anchors:
        """Everyday sentences without an English twin (not Parallel UD, fit part): each language's raw
        quantiles against English's at ``OTHER_QUANTILES``."""
        by_lang: dict[str, list[float]] = {}
        for r in rows:
            if not r.parallel and not r.check and (r.text, r.lang) in raw:
                by_lang.setdefault(r.lang, []).append(raw[(r.text, r.lang)])
        english = by_lang.pop("en", [])
        if not english:
            return cls(*(np.zeros(0, dtype=t) for t in (object, float, float, object)))
        e_q = np.quantile(english, OTHER_QUANTILES)
        langs = sorted(by_lang)
        k = len(OTHER_QUANTILES)
        return cls(
            np.repeat(np.array(langs, dtype=object), k),
            np.concatenate([np.quantile(by_lang[lang], OTHER_QUANTILES) for lang in langs]) if langs else np.zeros(0),
            np.tile(e_q, len(langs)),
            np.full(k * len(langs), OTHER, dtype=object),
        )


def stratum_weights(anchors: Anchors) -> np.ndarray:
    """Each (language, stratum) cell sums to 1."""
    keys = np.array([f"{lang}\t{s}" for lang, s in zip(anchors.lang, anchors.stratum, strict=True)], dtype=object)
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


def fit_monotone(x: np.ndarray, y: np.ndarray, w: np.ndarray, knots: np.ndarray) -> IsotonicMap:
    """The weighted least-squares piecewise-linear map through ``knots`` (on [0, 1]) with every slope at least
    ``MIN_SLOPE``: ``f(x) = c + MIN_SLOPE x + sum_j v_j ramp_j(x)``, ``v_j >= 0``, values clipped to [0, 1]."""
    optimize = require("scipy.optimize", "ml", "scipy")
    knots = np.unique(np.round(np.concatenate([[0.0, 1.0], knots]), 6))
    ramps = np.clip(x[:, None] - knots[None, :-1], 0.0, np.diff(knots)[None, :])
    design = np.column_stack([np.ones(len(x)), -np.ones(len(x)), ramps])
    sw = np.sqrt(w)
    coef, _ = optimize.nnls(design * sw[:, None], (y - MIN_SLOPE * x) * sw)
    ramps_k = np.clip(knots[:, None] - knots[None, :-1], 0.0, np.diff(knots)[None, :])
    values = coef[0] - coef[1] + MIN_SLOPE * knots + ramps_k @ coef[2:]
    ys = np.maximum.accumulate(np.round(np.clip(values, 0.0, 1.0), 6))
    return IsotonicMap(tuple(knots.tolist()), tuple(ys.tolist()), len(x))


def fit_anchored(
    anchors: Anchors, english: IsotonicMap, langs: Sequence[str]
) -> tuple[dict[str, IsotonicMap], IsotonicMap]:
    """(per-language maps, fallback) onto the scale whose English map is ``english`` (module docstring); a
    language of ``langs`` without anchors of its own gets the fallback, the joint fit."""
    target = english(anchors.english)
    base = stratum_weights(anchors)
    n_langs = len(set(anchors.lang.tolist()))
    fallback = fit_monotone(anchors.raw, target, base / n_langs, np.quantile(anchors.raw, KNOTS))
    per_lang: dict[str, IsotonicMap] = {}
    for lang in langs:
        own = anchors.lang == lang
        if not own.any():
            continue
        w = base.copy()
        w[~own] *= JOINT_WEIGHT * base[own].sum() / base[~own].sum() if (~own).any() else 0.0
        per_lang[lang] = fit_monotone(anchors.raw, target, w, np.quantile(anchors.raw[own], KNOTS))
    return per_lang, fallback


def flat_runs(m: IsotonicMap, slope: float = 0.05, lo: float = 0.05, hi: float = 0.95) -> dict[str, float]:
    """The widest band of raw outputs over which ``m`` rises by less than ``slope`` per unit of raw output,
    among the segments whose values lie within [``lo``, ``hi``] (the values a user reads): its raw ``from`` and
    ``to``, its ``width`` and the ``value`` it reads at. A wide run lifts every text in its band to one
    value."""
    x, y = np.asarray(m.x), np.asarray(m.y)
    best = {"from": 0.0, "to": 0.0, "width": 0.0, "value": float("nan")}
    start: int | None = None
    for i in range(len(x) - 1):
        dx, dy = x[i + 1] - x[i], y[i + 1] - y[i]
        flat = lo <= y[i] <= hi and dx > 0 and dy < slope * dx
        if flat and start is None:
            start = i
        if start is not None and (not flat or i == len(x) - 2):
            end = i + 1 if flat else i
            if x[end] - x[start] > best["width"]:
                best = {
                    "from": round(float(x[start]), 4),
                    "to": round(float(x[end]), 4),
                    "width": round(float(x[end] - x[start]), 4),
                    "value": round(float(y[start]), 4),
                }
            start = None
    return best
