"""Scorers: build one by registered name with options, wrapped in the persistent score cache."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import UnsupportedLanguageError
from ..registry import resolve
from .base import Scorer
from .cache import CachedScorer, ScoreCache

__all__ = ["CachedScorer", "ScoreCache", "Scorer", "build_scorer", "check_languages"]

# Options every scorer accepts, handled here rather than by the scorer itself.
CACHE_OPTION = "cache"  # a path to the SQLite cache, or "off"

# What to suggest when a language is not covered (README "Scorers").
MULTILINGUAL_HINT = (
    "scorers that cover more languages: 'perspective' (online, until 31 Dec 2026, needs "
    "PERSPECTIVE_API_KEY), 'detoxify' with --scorer-opt model=multilingual (7 languages, downloads "
    "weights), 'hf' with --scorer-opt model=<a multilingual toxicity checkpoint>"
)


def build_scorer(name: str, options: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> Scorer:
    """Instantiate scorer ``name`` with ``options`` and wrap it in the cache (unless ``cache=off``)."""
    opts = dict(options)
    cache_opt = opts.pop(CACHE_OPTION, None)
    scorer: Scorer = resolve("scorer", name)(**opts)
    if cache_opt == "off":
        return scorer
    return CachedScorer(scorer, ScoreCache(cache_opt))


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
