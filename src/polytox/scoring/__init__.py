"""Scorers: build one by registered name with options, wrapped in the persistent score cache."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import PolytoxError, UnsupportedLanguageError
from ..registry import resolve
from .base import Scorer
from .cache import CachedScorer, ScoreCache

__all__ = ["CachedScorer", "ScoreCache", "Scorer", "build_scorer", "check_languages"]

# Options every scorer accepts, handled here rather than by the scorer itself.
CACHE_OPTION = "cache"  # a path to the SQLite cache, or "off"
CALIBRATION_OPTION = "calibration"  # a file written by ``polytox calibrate``, applied on top of the cache

# What to suggest when a language is not covered (README "Scorers").
MULTILINGUAL_HINT = (
    "scorers that cover more languages: 'perspective' (online, until 31 Dec 2026, needs "
    "PERSPECTIVE_API_KEY), 'detoxify' with --scorer-opt model=multilingual (7 languages, downloads "
    "weights), 'hf' with --scorer-opt model=<a multilingual toxicity checkpoint>"
)


def check_options(name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse options the scorer does not take, listing the ones it does (instead of a TypeError)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = [p for p, v in params.items() if p != "self" and v.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = sorted(set(options) - set(known))
    if unknown:
        extra = [CACHE_OPTION, CALIBRATION_OPTION]
        raise PolytoxError(f"scorer {name!r} has no option {', '.join(repr(u) for u in unknown)}; "
                           f"its options: {', '.join(sorted(known) + extra)}")


def build_scorer(name: str, options: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> Scorer:
    """Instantiate scorer ``name`` with ``options``, wrap it in the cache (unless ``cache=off``) and, with
    ``calibration=FILE``, apply a calibration map on top (so the cache keeps raw scores)."""
    opts = dict(options)
    cache_opt = opts.pop(CACHE_OPTION, None)
    calibration_opt = opts.pop(CALIBRATION_OPTION, None)
    factory = resolve("scorer", name)
    check_options(name, factory, opts)
    scorer: Scorer = factory(**opts)
    if cache_opt != "off":
        scorer = CachedScorer(scorer, ScoreCache(cache_opt))
    if calibration_opt:
        from .calibration import CalibratedScorer, Calibration

        scorer = CalibratedScorer(scorer, Calibration.load(calibration_opt))
    return scorer


def check_languages(scorer: Scorer, langs: Iterable[str]) -> None:
    """Fail before any work when the scorer cannot score some of the prompt languages."""
    missing = sorted({lang for lang in langs if not scorer.supports(lang)})
    if missing:
        supported = sorted(scorer.languages) if scorer.languages is not None else ["any"]
        raise UnsupportedLanguageError(
            f"scorer {scorer.name!r} does not support language(s) {', '.join(missing)} "
            f"(it supports: {', '.join(supported)}). Restrict the prompts with --lang "
            f"{','.join(supported[:3])}, or choose another scorer; {MULTILINGUAL_HINT}."
        )
