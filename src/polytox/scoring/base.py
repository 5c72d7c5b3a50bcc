"""The scorer contract: texts and languages in, one ``Score`` (values or an error) per text out.

Implementations override ``score_batch``. The base class handles what every scorer must get right:
unsupported languages, empty texts and invalid Unicode become errors (never a made-up 0), batches are cut to
``batch_size``, a batch whose scorer raises becomes per-text transient errors instead of killing the
run, and a scorer that is not ``thread_safe`` runs one ``score`` call at a time, so any scorer may be shared
by many threads (a framework's metric pool, a server) and return what a single-threaded call returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..types import Score

EMPTY_TEXT_ERROR = "EMPTY_TEXT: nothing to score"
INVALID_TEXT_ERROR = "INVALID_TEXT: not valid Unicode (a lone surrogate, e.g. from invalid UTF-8)"

_CALL_LOCKS_GUARD = threading.Lock()  # creates each scorer's call lock once


def is_valid_unicode(text: str) -> bool:
    """False for strings no UTF-8 encoder accepts (lone surrogates), which no scorer can score honestly."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def config_digest(config: Mapping[str, Any]) -> str:
    """Short digest of the options that change a scorer's output (part of its cache identity)."""
    blob = json.dumps(dict(config), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


class Scorer(ABC):
    """Base class of all scorers. ``name@version`` identifies the scores in the cache and in stores."""

    name: ClassVar[str] = "scorer"
    version: str = "0"
    attributes: tuple[str, ...] = ("toxicity",)
    languages: frozenset[str] | None = None  # None: any language
    batch_size: int = 256
    # True when ``score_batch`` may run in several threads at once (network scorers); callers such as
    # ``polytox score`` then keep a few batches in flight so a slow request never idles the quota. When
    # False, ``score`` serialises its calls (``_call_lock``): local models keep per-object state (a fast
    # tokenizer's settings, forward hooks on a shared model) that concurrent calls would corrupt.
    thread_safe: bool = False

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def supports(self, lang: str) -> bool:
        return self.languages is None or lang in self.languages

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        """Whether ``attribute`` (lower-case) is scored in ``lang``. Most scorers score all their attributes
        in all their languages; one with per-attribute language lists (Perspective's SEXUALLY_EXPLICIT and
        FLIRTATION were English-only) overrides this, and ``serve`` refuses such a pair before scoring."""
        return attribute.lower() in self.attributes and self.supports(lang)

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this scorer."""
        return {
            "id": self.id,
            "attributes": list(self.attributes),
            "languages": sorted(self.languages) if self.languages is not None else "any",
        }

    @abstractmethod
    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        """Score non-empty texts in supported languages; one ``Score`` per text, in order."""

    def _call_lock(self) -> contextlib.AbstractContextManager[Any]:
        """What a ``score`` call holds: nothing for a thread-safe scorer, else this scorer's own lock (made
        on first use, so subclasses need not call ``__init__``; reentrant, for scorers that call
        ``score`` from ``score_batch``)."""
        if self.thread_safe:
            return contextlib.nullcontext()
        lock = self.__dict__.get("_score_lock")
        if lock is None:
            with _CALL_LOCKS_GUARD:
                lock = self.__dict__.setdefault("_score_lock", threading.RLock())
        return lock  # type: ignore[no-any-return]

    def score(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        """Score any texts: unsupported languages and empty texts become errors; crashes become errors."""
        if len(texts) != len(langs):
            raise ValueError("texts and langs must have the same length")
        with self._call_lock():
            return self._score_serialised(texts, langs)

    def _score_serialised(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        out: list[Score | None] = [None] * len(texts)
        todo: list[int] = []
        for i, (text, lang) in enumerate(zip(texts, langs, strict=True)):
            if not self.supports(lang):
                out[i] = Score.failed(
                    f"LANGUAGE_NOT_SUPPORTED: unsupported language: {lang} ({self.name} does not score it)"
                )
            elif not text or not text.strip():
                out[i] = Score.failed(EMPTY_TEXT_ERROR)
            elif not is_valid_unicode(text):
                out[i] = Score.failed(INVALID_TEXT_ERROR)
            else:
                todo.append(i)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            try:
                scores = self.score_batch([texts[i] for i in chunk], [langs[i] for i in chunk])
                if len(scores) != len(chunk):
                    raise RuntimeError(f"{self.name} returned {len(scores)} scores for {len(chunk)} texts")
            except Exception as exc:  # a scorer that crashes part-way loses only its batch, as errors
                scores = [Score.failed(f"SCORER_CRASHED: {type(exc).__name__}: {exc}", transient=True)] * len(chunk)
            for i, score in zip(chunk, scores, strict=True):
                out[i] = score
        return [s if s is not None else Score.failed("internal: unscored") for s in out]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (sessions, models)."""
