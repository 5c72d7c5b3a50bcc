"""Baseline scorers measured beside polytox-ml on the same texts: the LDNOOBW lexicon and the English SVM.

The lexicon is the project's ``lexicon`` scorer when it is registered (``toxicity=rate``: matches per word,
a graded score); otherwise a minimal word-list matcher here stands in (whole-word matches for spaced
scripts, substrings for zh/ja), and the table says which one was used. The SVM scores English only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...errors import MissingDependencyError, PolytoxError
from ...registry import names
from .data import Example

UNSPACED = frozenset({"zh", "ja"})


def _scores_to_array(scores: Sequence[object]) -> np.ndarray:
    out = np.full(len(scores), np.nan)
    for i, score in enumerate(scores):
        value = score.get("toxicity") if getattr(score, "ok", False) else None  # type: ignore[attr-defined]
        if value is not None:
            out[i] = float(value)
    return out


def svm_baseline(examples: Sequence[Example]) -> np.ndarray | None:
    """The English SVM's toxicity (NaN for other languages); None when its wheel is not installed."""
    from ...scoring import build_scorer

    try:
        scorer = build_scorer("svm", {"cache": "off"})
    except MissingDependencyError:
        return None
    return _scores_to_array(scorer.score([e.text for e in examples], [e.lang for e in examples]))


def lexicon_baseline(examples: Sequence[Example], lexicon_dir: Path | str) -> tuple[np.ndarray, str]:
    """Lexicon scores (matches per word) and which implementation produced them."""
    texts, langs = [e.text for e in examples], [e.lang for e in examples]
    if "lexicon" in names("scorer"):
        from ...scoring import build_scorer

        scorer = build_scorer("lexicon", {"cache": "off", "dir": str(lexicon_dir), "toxicity": "rate"})
        return _scores_to_array(scorer.score(texts, langs)), "lexicon scorer (toxicity=rate)"
    return minimal_lexicon_scores(texts, langs, lexicon_dir), "minimal local matcher (matches per word)"


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def minimal_lexicon_scores(texts: Sequence[str], langs: Sequence[str], lexicon_dir: Path | str) -> np.ndarray:
    """Matches per word of ``<dir>/<lang>.txt`` terms (NaN where a language has no list)."""
    folder = Path(lexicon_dir)
    if not folder.is_dir():
        raise PolytoxError(f"lexicon folder {folder} not found")
    patterns: dict[str, re.Pattern[str] | None] = {}
    out = np.full(len(texts), np.nan)
    for i, (text, lang) in enumerate(zip(texts, langs, strict=True)):
        if lang not in patterns:
            path = folder / f"{lang}.txt"
            terms = (
                [_norm(t.strip()) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
                if path.exists()
                else []
            )
            alternation = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
            if not terms:
                patterns[lang] = None
            elif lang in UNSPACED:
                patterns[lang] = re.compile(alternation)
            else:
                patterns[lang] = re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")
        pattern = patterns[lang]
        if pattern is None:
            continue
        norm = _norm(text)
        words = max(1, len(norm) if lang in UNSPACED else len(norm.split()))
        out[i] = len(pattern.findall(norm)) / words
    return out
