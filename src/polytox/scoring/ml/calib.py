"""Perspective-scale calibration inside the polytox-ml head: weighted isotonic maps, one per language.

Perspective TOXICITY is "the probability that a rater would call the text toxic", calibrated with isotonic
regression (RTP section 2.1). The head does the same on top of its combined score:

- English: two maps, one per kind of text, because the same combined score means a different Perspective
  value on web text (RTP prompts and continuations, 2020 scores) and on continuations written by language
  models (GPT-2 / GPT-Neo, 2022 scores): one map fitted on both is too low on web text and too high on
  model continuations. The ``continuation`` map (what ``polytox eval`` scores) gives the model
  continuations ``continuation_share`` of the fit weight and web text the rest (which steadies its top
  bins, where few continuations lie); the ``web`` map (what ``polytox build`` and ``corpus score`` score)
  gives them ``web_share``. ``TEXT_KINDS`` names the two;
- other languages: Perspective scores do not exist, so the map is fitted on the share of human raters who
  call a text toxic (RTP-LX: share of the 3 raters rating >= 3; ToLD-Br and the Japanese set: their
  ``frac``), per language when it has enough such rows, else one map over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..calibration import IsotonicMap, fit_isotonic

MIN_ROWS_PER_LANGUAGE = 300  # a language gets its own map with at least this many rater-share rows
# Isotonic maps are step functions: every text in a step gets the same value, and ties throw away the
# ranking the head learned. A small share of the raw score breaks the ties (strictly increasing map) and
# moves no value by more than TIE_BREAK.
TIE_BREAK = 0.002
ENGLISH = "en"
CONTINUATION, WEB = "continuation", "web"
TEXT_KINDS = (CONTINUATION, WEB)  # what a scorer is told it scores; picks the English map


@dataclass(frozen=True)
class ScaleMaps:
    """The maps of one head mode: English web text and English model continuations (Perspective), per other
    language (rater share), and a fallback. ``english_continuation`` is None in heads fitted before the
    split: their one English map serves both kinds."""

    english: IsotonicMap
    fallback: IsotonicMap
    per_lang: Mapping[str, IsotonicMap] = field(default_factory=dict)
    english_continuation: IsotonicMap | None = None

    def english_map(self, text: str) -> IsotonicMap:
        if text not in TEXT_KINDS:
            raise ValueError(f"text must be one of {', '.join(TEXT_KINDS)}, got {text!r}")
        if text == CONTINUATION and self.english_continuation is not None:
            return self.english_continuation
        return self.english

    def map_for(self, lang: str, text: str = CONTINUATION) -> IsotonicMap:
        """The map texts of ``lang`` (of kind ``text``, for English) go through."""
        return self.english_map(text) if lang == ENGLISH else self.per_lang.get(lang, self.fallback)

    def apply_lang(self, raw: np.ndarray, lang: str, text: str = CONTINUATION) -> np.ndarray:
        """``apply`` for rows of one language (no per-row lookups: what re-reading a large run uses)."""
        raw = np.asarray(raw, dtype=float)
        out = self.map_for(lang, text)(raw)
        return np.clip((1.0 - TIE_BREAK) * out + TIE_BREAK * np.clip(raw, 0.0, 1.0), 0.0, 1.0)

    def apply(self, raw: np.ndarray, langs: Sequence[str], text: str | Sequence[str] = CONTINUATION) -> np.ndarray:
        """Calibrated values of raw combined scores; ``text`` (one kind, or one per row) picks the English map
        (other languages have one)."""
        raw = np.asarray(raw, dtype=float)
        out = np.empty_like(raw)
        lang_arr = np.asarray(list(langs), dtype=object)
        kinds = np.full(len(raw), text, dtype=object) if isinstance(text, str) else np.asarray(list(text), dtype=object)
        english = {kind: self.english_map(kind) for kind in set(kinds.tolist())}  # validates every kind
        for lang in set(lang_arr.tolist()):
            rows = lang_arr == lang
            if lang != ENGLISH:
                out[rows] = self.per_lang.get(lang, self.fallback)(raw[rows])
                continue
            for kind, mapping in english.items():
                sel = rows & (kinds == kind)
                if sel.any():
                    out[sel] = mapping(raw[sel])
        return np.clip((1.0 - TIE_BREAK) * out + TIE_BREAK * np.clip(raw, 0.0, 1.0), 0.0, 1.0)

    def to_json(self) -> dict[str, Any]:
        data = {
            "english": self.english.to_json(),
            "fallback": self.fallback.to_json(),
            "per_lang": {k: v.to_json() for k, v in sorted(self.per_lang.items())},
        }
        if self.english_continuation is not None:
            data["english_continuation"] = self.english_continuation.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScaleMaps:
        continuation = data.get("english_continuation")
        return cls(
            english=IsotonicMap.from_json(data["english"]),
            fallback=IsotonicMap.from_json(data["fallback"]),
            per_lang={k: IsotonicMap.from_json(v) for k, v in data.get("per_lang", {}).items()},
            english_continuation=None if continuation is None else IsotonicMap.from_json(continuation),
        )


def perspective_weights(is_generation: np.ndarray, gen_share: float) -> np.ndarray:
    """Weights giving model generations ``gen_share`` of the total and web text the rest."""
    w = np.ones(len(is_generation), dtype=float)
    n_gen, n_web = int(is_generation.sum()), int((~is_generation).sum())
    if n_gen and n_web:
        w[is_generation] = gen_share / n_gen
        w[~is_generation] = (1.0 - gen_share) / n_web
    return w


def fit_scale_maps(
    raw_persp: np.ndarray,
    persp: np.ndarray,
    is_generation: np.ndarray,
    web_share: float,
    continuation_share: float,
    raw_share: np.ndarray,
    share: np.ndarray,
    share_langs: Sequence[str],
) -> ScaleMaps:
    """Fit every map of one mode from (raw score, reference) pairs; the two English maps differ only in the
    share of the fit weight their model continuations carry."""
    english = fit_isotonic(raw_persp, persp, perspective_weights(is_generation, web_share))
    continuation = fit_isotonic(raw_persp, persp, perspective_weights(is_generation, continuation_share))
    langs = np.asarray(list(share_langs), dtype=object)
    other = langs != ENGLISH
    fallback = fit_isotonic(raw_share[other], share[other]) if other.any() else english
    per_lang: dict[str, IsotonicMap] = {}
    for lang in sorted(set(langs[other].tolist())):
        rows = langs == lang
        if rows.sum() >= MIN_ROWS_PER_LANGUAGE:
            per_lang[lang] = fit_isotonic(raw_share[rows], share[rows])
    return ScaleMaps(english=english, fallback=fallback, per_lang=per_lang, english_continuation=continuation)
