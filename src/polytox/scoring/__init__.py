"""Scorers: build one by registered name with options, wrapped in the persistent score cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._util.options import Option, declared_options, signature_schema
from .._util.options import check_options as validate
from ..errors import UnsupportedLanguageError
from ..registry import resolve
from .base import Scorer
from .cache import CachedScorer, ScoreCache

__all__ = ["CachedScorer", "ScoreCache", "Scorer", "build_scorer", "check_languages"]

# Options every scorer accepts, handled here rather than by the scorer itself (rows of the same schema).
CACHE_OPTION = "cache"
CALIBRATION_OPTION = "calibration"
WRAPPER_OPTIONS: dict[str, Option] = {
    CACHE_OPTION: Option("str", help="the SQLite score cache's path, or off"),
    CALIBRATION_OPTION: Option("str", help="a file written by polytox calibrate, applied on top of the cache"),
}

# What to suggest when a language is not covered (README "Scorers").
MULTILINGUAL_HINT = (
    "scorers that cover more languages: 'perspective' (online, until 31 Dec 2026, needs "
    "PERSPECTIVE_API_KEY), 'detoxify' with --scorer-opt model=multilingual (7 languages, downloads "
    "weights), 'hf' with --scorer-opt model=<a multilingual toxicity checkpoint>"
)


def scorer_schema(factory: Callable[..., Any]) -> dict[str, Option] | None:
    """The options a scorer factory takes: its declared ``OPTIONS`` (``Field`` rows of ``_util.schema``, each
    with its default; ``default`` declares polytox-ml's, which it passes on, beside its own). A plugin's
    factory that declares none has its options read from its signature. None: the factory takes any option
    (a plugin's ``**kw`` without ``OPTIONS``)."""
    declared = declared_options(factory)
    if declared is not None:
        return dict(declared)
    derived, var_kw = signature_schema(factory)
    return None if var_kw else derived


def check_options(name: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse options the scorer does not take, listing the ones it does, and values of the wrong type,
    saying what the option accepts (instead of a TypeError or ValueError from inside the scorer)."""
    schema = scorer_schema(factory)
    if schema is not None:
        validate(f"scorer {name!r}", {**schema, **WRAPPER_OPTIONS}, options)


def check_scorer(name: str, options: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
    """Refuse an unknown scorer or a bad option without building anything (a command that uses two
    scorers checks both before the first one scores)."""
    opts = dict(options)
    opts.pop(CACHE_OPTION, None)
    opts.pop(CALIBRATION_OPTION, None)
    check_options(name, resolve("scorer", name), opts)


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
    wanted = set(langs)
    missing = sorted(lang for lang in wanted if not scorer.supports(lang))
    if missing:
        supported = sorted(scorer.languages) if scorer.languages is not None else ["any"]
        raise UnsupportedLanguageError(
            f"scorer {scorer.name!r} does not support language(s) {', '.join(missing)} "
            f"(it supports: {', '.join(supported)}). Restrict the prompts with --lang "
            f"{','.join(supported[:3])}, or choose another scorer; {MULTILINGUAL_HINT}."
        )
    for attribute in scorer.attributes:  # per-attribute languages (Perspective: SEXUALLY_EXPLICIT in English)
        lacking = sorted(lang for lang in wanted if not scorer.supports_attribute(attribute, lang))
        if lacking:
            raise UnsupportedLanguageError(
                f"scorer {scorer.name!r} does not read {attribute.upper()} in {', '.join(lacking)}; drop it from "
                f"--scorer-opt attributes=... or restrict the prompts with --lang"
            )
