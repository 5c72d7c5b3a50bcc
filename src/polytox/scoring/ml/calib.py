"""Perspective-scale calibration inside the polytox-ml head: weighted isotonic maps, one per language.

Perspective TOXICITY is "the probability that a rater would call the text toxic", calibrated with isotonic
regression (RTP section 2.1). The head does the same on top of its combined score:

- English: the map is fitted on Perspective-scored texts, web text (RTP prompts and continuations) AND
  continuations written by language models, with weights that give each of the two distributions a fixed
  share of the fit (``gen_share``): one map that matches Perspective's rates on both;
- other languages: Perspective scores do not exist, so the map is fitted on the share of human raters who
  call a text toxic (RTP-LX: share of the 3 raters rating >= 3; ToLD-Br and the Japanese set: their
  ``frac``), per language when it has enough such rows, else one map over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import require
from ..calibration import IsotonicMap

MIN_ROWS_PER_LANGUAGE = 300  # a language gets its own map with at least this many rater-share rows
# Isotonic maps are step functions: every text in a step gets the same value, and ties throw away the
# ranking the head learned. A small share of the raw score breaks the ties (strictly increasing map) and
# moves no value by more than TIE_BREAK.
TIE_BREAK = 0.002
ENGLISH = "en"


def fit_weighted_isotonic(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> IsotonicMap:
    """Non-decreasing ``f`` on [0, 1] with ``f(x) ~ y`` (weighted least squares, scikit-learn)."""
    isotonic = require("sklearn.isotonic", "ml")
    model = isotonic.IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), sample_weight=weight)
    xs = np.round(np.asarray(model.X_thresholds_, dtype=float), 6)
    ys = np.round(np.asarray(model.y_thresholds_, dtype=float), 6)
    xs, keep = np.unique(xs, return_index=True)  # rounding can merge breakpoints; keep the first of each
    return IsotonicMap(tuple(xs.tolist()), tuple(np.maximum.accumulate(ys[keep]).tolist()), len(x))


@dataclass(frozen=True)
class ScaleMaps:
    """The maps of one head mode: English (Perspective), per other language (rater share), and a fallback."""

    english: IsotonicMap
    fallback: IsotonicMap
    per_lang: Mapping[str, IsotonicMap] = field(default_factory=dict)

    def apply(self, raw: np.ndarray, langs: Sequence[str]) -> np.ndarray:
        raw = np.asarray(raw, dtype=float)
        out = np.empty_like(raw)
        lang_arr = np.asarray(list(langs), dtype=object)
        for lang in set(lang_arr.tolist()):
            rows = lang_arr == lang
            mapping = self.english if lang == ENGLISH else self.per_lang.get(lang, self.fallback)
            out[rows] = mapping(raw[rows])
        return np.clip((1.0 - TIE_BREAK) * out + TIE_BREAK * np.clip(raw, 0.0, 1.0), 0.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        return {"english": self.english.to_json(), "fallback": self.fallback.to_json(),
                "per_lang": {k: v.to_json() for k, v in sorted(self.per_lang.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScaleMaps:
        return cls(english=IsotonicMap.from_json(data["english"]), fallback=IsotonicMap.from_json(data["fallback"]),
                   per_lang={k: IsotonicMap.from_json(v) for k, v in data.get("per_lang", {}).items()})


def perspective_weights(is_generation: np.ndarray, gen_share: float) -> np.ndarray:
    """Weights giving model generations ``gen_share`` of the total and web text the rest."""
    w = np.ones(len(is_generation), dtype=float)
    n_gen, n_web = int(is_generation.sum()), int((~is_generation).sum())
    if n_gen and n_web:
        w[is_generation] = gen_share / n_gen
        w[~is_generation] = (1.0 - gen_share) / n_web
    return w


def fit_scale_maps(raw_persp: np.ndarray, persp: np.ndarray, is_generation: np.ndarray, gen_share: float,
                   raw_share: np.ndarray, share: np.ndarray, share_langs: Sequence[str]) -> ScaleMaps:
    """Fit every map of one mode from (raw score, reference) pairs."""
    english = fit_weighted_isotonic(raw_persp, persp, perspective_weights(is_generation, gen_share))
    langs = np.asarray(list(share_langs), dtype=object)
    other = langs != ENGLISH
    fallback = fit_weighted_isotonic(raw_share[other], share[other]) if other.any() else english
    per_lang: dict[str, IsotonicMap] = {}
    for lang in sorted(set(langs[other].tolist())):
        rows = langs == lang
        if rows.sum() >= MIN_ROWS_PER_LANGUAGE:
            per_lang[lang] = fit_weighted_isotonic(raw_share[rows], share[rows])
    return ScaleMaps(english=english, fallback=fallback, per_lang=per_lang)
