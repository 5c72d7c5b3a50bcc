"""Monotone (isotonic) maps from one scorer's scale onto a reference's, and a scorer that applies them.

Why: a lab that moves from Perspective (shutting down 31 Dec 2026) to a local classifier wants new
numbers on the old scale. ``polytox calibrate`` fits ``f`` with ``f(local) ~ reference`` by isotonic
regression (scikit-learn), one map per language where a language has enough pairs and one global map for
the rest; ``--scorer-opt calibration=FILE`` applies it to any scorer. A monotone map keeps the scorer's
ranking (so AUC barely moves) and fixes its scale (so means and threshold rates, EMT and EP, line up).

The file is small JSON: the breakpoints of each piecewise-linear map, the scorer id it was fitted for
(applying it to another scorer is refused), the reference, and the held-out report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from .._util.atomic import atomic_write_text
from ..errors import PolytoxError, require
from ..types import Score
from .base import Scorer

FORMAT = "polytox-calibration/1"


@dataclass(frozen=True)
class IsotonicMap:
    """A non-decreasing piecewise-linear map given by breakpoints; flat (clipped) outside them."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    n: int = 0

    def __call__(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        return np.interp(np.asarray(values, dtype=float), self.x, self.y)

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IsotonicMap:
        x, y = tuple(float(v) for v in data["x"]), tuple(float(v) for v in data["y"])
        if (
            not x
            or len(x) != len(y)
            or any(b < a for a, b in pairwise(x))
            or any(b < a - 1e-12 for a, b in pairwise(y))
        ):
            raise ValueError("breakpoints must be non-empty, of equal length and non-decreasing")
        return cls(x, y, int(data.get("n", 0)))


def fit_isotonic(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None) -> IsotonicMap:
    """Fit a non-decreasing map with ``f(x) ~ y`` on [0, 1] (scikit-learn's IsotonicRegression, weighted
    least squares when ``weight`` is given): the one isotonic fit of polytox (``calibrate`` and the default
    scorer's maps). Breakpoints are rounded to 6 digits; where rounding merges two, the first is kept."""
    isotonic = require("sklearn.isotonic", "analysis")
    model = isotonic.IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    model.fit(np.asarray(x, dtype=float), np.asarray(y, dtype=float), sample_weight=weight)
    xs = np.round(np.asarray(model.X_thresholds_, dtype=float), 6)
    ys = np.round(np.asarray(model.y_thresholds_, dtype=float), 6)
    xs, keep = np.unique(xs, return_index=True)
    return IsotonicMap(tuple(xs.tolist()), tuple(np.maximum.accumulate(ys[keep]).tolist()), len(x))


@dataclass(frozen=True)
class Calibration:
    """Per-language isotonic maps (global fallback) for one attribute of one scorer."""

    scorer: str
    reference: str
    attribute: str
    global_map: IsotonicMap
    per_lang: Mapping[str, IsotonicMap] = field(default_factory=dict)
    report: Mapping[str, Any] = field(default_factory=dict)

    def map_for(self, lang: str) -> IsotonicMap:
        return self.per_lang.get(lang, self.global_map)

    def apply(self, values: Sequence[float] | np.ndarray, langs: Sequence[str]) -> np.ndarray:
        vals = np.asarray(values, dtype=float)
        out = np.empty_like(vals)
        lang_arr = np.asarray(langs, dtype=object)
        for lang in set(langs):
            sel = lang_arr == lang
            out[sel] = self.map_for(lang)(vals[sel])
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "scorer": self.scorer,
            "reference": self.reference,
            "attribute": self.attribute,
            "global": self.global_map.to_json(),
            "per_lang": {k: v.to_json() for k, v in sorted(self.per_lang.items())},
            "report": dict(self.report),
        }

    @property
    def digest(self) -> str:
        maps = {k: v for k, v in self.to_json().items() if k != "report"}
        return hashlib.sha256(json.dumps(maps, sort_keys=True).encode()).hexdigest()[:8]

    def save(self, path: Path | str) -> None:
        atomic_write_text(Path(path), json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path | str) -> Calibration:
        path = Path(path)
        if not path.is_file():
            raise PolytoxError(f"calibration file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError(f"format is {data.get('format')!r}, expected {FORMAT!r}")
            return cls(
                scorer=str(data["scorer"]),
                reference=str(data["reference"]),
                attribute=str(data.get("attribute", "toxicity")),
                global_map=IsotonicMap.from_json(data["global"]),
                per_lang={str(k): IsotonicMap.from_json(v) for k, v in data.get("per_lang", {}).items()},
                report=data.get("report", {}),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PolytoxError(f"{path}: not a polytox calibration file ({exc})") from None


def fit_calibration(
    x: np.ndarray,
    y: np.ndarray,
    langs: Sequence[str],
    *,
    scorer: str,
    reference: str,
    attribute: str = "toxicity",
    min_per_lang: int = 200,
) -> Calibration:
    """A global map on all pairs, plus one per language with at least ``min_per_lang`` pairs."""
    lang_arr = np.asarray(langs, dtype=object)
    per_lang = {}
    for lang in sorted(set(langs)):
        sel = lang_arr == lang
        if int(sel.sum()) >= min_per_lang and len(np.unique(x[sel])) >= 2:
            per_lang[lang] = fit_isotonic(x[sel], y[sel])
    return Calibration(scorer, reference, attribute, fit_isotonic(x, y), per_lang)


class CalibratedScorer(Scorer):
    """Any scorer with a calibration applied to one attribute; the raw value kept as ``<attr>_uncalibrated``."""

    def __init__(self, inner: Scorer, calibration: Calibration) -> None:
        if calibration.scorer != inner.id:
            raise PolytoxError(
                f"the calibration was fitted for scorer {calibration.scorer!r}, not {inner.id!r}: a map "
                "fitted on one scorer's scale means nothing on another's (refit with polytox calibrate)"
            )
        if calibration.attribute not in inner.attributes:
            raise PolytoxError(f"scorer {inner.id!r} has no attribute {calibration.attribute!r} to calibrate")
        self.inner = inner
        self.calibration = calibration
        self.version = inner.version
        self.languages = inner.languages
        self.batch_size = inner.batch_size
        self.thread_safe = inner.thread_safe
        self.raw_attribute = f"{calibration.attribute}_uncalibrated"
        self.attributes = (*inner.attributes, self.raw_attribute)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def id(self) -> str:
        return f"{self.inner.id}+cal-{self.calibration.digest}"

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "id": self.id,
            "calibration": {
                "digest": self.calibration.digest,
                "reference": self.calibration.reference,
                "attribute": self.calibration.attribute,
                "languages": sorted(self.calibration.per_lang),
            },
        }

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        if attribute.lower() == self.raw_attribute:
            return self.inner.supports_attribute(self.calibration.attribute, lang)
        return self.inner.supports_attribute(attribute, lang)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        return self.score(texts, langs)

    def score(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        scores = self.inner.score(texts, langs)
        attr = self.calibration.attribute
        todo = [i for i, s in enumerate(scores) if s.get(attr) is not None]
        if not todo:
            return scores
        mapped = self.calibration.apply(
            [scores[i].get(attr) for i in todo],  # type: ignore[misc]
            [langs[i] for i in todo],
        )
        out = list(scores)
        for i, value in zip(todo, mapped, strict=True):
            values = dict(scores[i].values or {})
            values[self.raw_attribute] = values[attr]
            values[attr] = float(value)
            out[i] = Score(values=values)
        return out

    def close(self) -> None:
        self.inner.close()
