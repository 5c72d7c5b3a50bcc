"""A persistent score cache shared by all runs, in SQLite (WAL, safe across processes).

Key: (text hash, language, scorer@version, attributes); a scorer that keeps its raw score (``polytox-ml``,
``default``) is keyed by the identity of its raw scores and maps a cached raw score onto its scale when
read, so one entry serves every scale. Successful scores and permanent errors (an
API's 400 with its reason) are kept until retried; transient errors (timeouts, quota, crashes) are never
kept, so a rerun retries them. ``polytox eval --retry-failed`` retries the permanent ones too
(``retrying_errors``): a 400 whose cause has since been fixed is asked again, and the new answer
replaces it. For a scorer like Perspective, whose models changed silently over the years and which
shuts down on 31 Dec 2026, this cache is the permanent record of every response received.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .._util.paths import default_cache_dir
from .._util.sqlite import open_wal
from ..types import Score, text_hash
from .base import Scorer
from .storing import storing

SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
  key TEXT PRIMARY KEY,
  scorer TEXT NOT NULL,
  lang TEXT NOT NULL,
  attributes TEXT NOT NULL,
  text_sha256 TEXT NOT NULL,
  value_json TEXT,
  error TEXT,
  created REAL NOT NULL
);
"""


class ScoreCache:
    """Get/put scores by key; thread-safe; one SQLite file, opened (and created) at its first use, so a
    command refused after its scorer was built leaves no cache file behind."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_cache_dir() / "scores.sqlite"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection; call with ``_lock`` held."""
        if self._conn is None:
            self._conn = open_wal(self.path, SCHEMA)
        return self._conn

    @staticmethod
    def key(text: str, lang: str, scorer_id: str, attributes: Sequence[str]) -> str:
        return f"{text_hash(text)}|{lang}|{scorer_id}|{','.join(attributes)}"

    def get_many(self, keys: Sequence[str]) -> dict[str, Score]:
        found: dict[str, Score] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value_json, error FROM scores WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, value_json, error in rows:
                    found[key] = Score(values=json.loads(value_json)) if value_json else Score.failed(error)
        return found

    def put_many(self, items: Sequence[tuple[str, str, str, str, Sequence[str], Score]]) -> int:
        """Store (key, text, lang, scorer_id, attributes, score); transient errors are skipped."""
        rows = [
            (
                key,
                scorer_id,
                lang,
                ",".join(attrs),
                text_hash(text),
                json.dumps(dict(score.values)) if score.values is not None else None,
                score.error,
                time.time(),
            )
            for key, text, lang, scorer_id, attrs, score in items
            if not score.transient
        ]
        if rows:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?,?,?,?,?,?,?,?)", rows)
                self._db.execute("COMMIT")
        return len(rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM scores").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class CachedScorer(Scorer):
    """Wraps a scorer with the persistent cache; hits are free, misses are scored and stored."""

    def __init__(self, inner: Scorer, cache: ScoreCache) -> None:
        self.inner = inner
        self.cache = cache
        self.version = inner.version
        self.attributes = inner.attributes
        self.languages = inner.languages
        self.batch_size = inner.batch_size
        self.thread_safe = inner.thread_safe
        self.hits = 0
        self.misses = 0
        # True while a run's failed scores are retried (``retrying_errors``): a cached error is a miss, so a
        # permanent error whose cause was fixed (a Perspective 400) is asked again and replaced.
        self.retry_errors = False

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "cache": str(self.cache.path)}

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        return self.inner.supports_attribute(attribute, lang)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        return self.score(texts, langs)

    @property
    def cache_id(self) -> str:
        """The scorer part of the cache key: a scorer that keeps raw scores (``from_cached``) is cached by the
        identity of its raw scores, so every scale of it shares one cache entry per text."""
        return str(getattr(self.inner, "raw_id", self.inner.id))

    def _read_back(self, keys: Sequence[str], langs: Sequence[str], found: dict[str, Score]) -> dict[str, Score]:
        """Cached scores as the inner scorer reads them (its scale); those it cannot read are left out (missed)."""
        from_cached = getattr(self.inner, "from_cached", None)
        if from_cached is None or not found:
            return found
        hits = [i for i, k in enumerate(keys) if k in found]
        read = from_cached([found[keys[i]] for i in hits], [langs[i] for i in hits])
        return {keys[i]: s for i, s in zip(hits, read, strict=True) if s is not None}

    def score(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        cache_id = self.cache_id
        keys = [
            self.cache.key(t or "", lang, cache_id, self.inner.attributes) for t, lang in zip(texts, langs, strict=True)
        ]
        found = self._read_back(keys, langs, self.cache.get_many(keys))
        if self.retry_errors:
            found = {k: score for k, score in found.items() if score.ok}
        miss = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(keys) - len(miss)
        self.misses += len(miss)
        fresh = self.inner.score([texts[i] for i in miss], [langs[i] for i in miss]) if miss else []
        if not storing():  # a doNotStore request: read the cache, write nothing
            results = dict(zip(miss, fresh, strict=True))
            return [results[i] if i in results else found[k] for i, k in enumerate(keys)]
        self.cache.put_many(
            [
                (keys[i], texts[i] or "", langs[i], cache_id, self.inner.attributes, s)
                for i, s in zip(miss, fresh, strict=True)
            ]
        )
        results = dict(zip(miss, fresh, strict=True))
        return [results[i] if i in results else found[k] for i, k in enumerate(keys)]

    def close(self) -> None:
        self.inner.close()


@contextmanager
def retrying_errors(scorer: Scorer) -> Iterator[None]:
    """Within this block the score cache under ``scorer`` (its own or a wrapped one's, through ``.inner``)
    treats cached errors as misses: ``--retry-failed`` scores them again instead of replaying them."""
    cached = scorer
    while not isinstance(cached, CachedScorer) and getattr(cached, "inner", None) is not None:
        cached = cached.inner  # type: ignore[attr-defined]
    if not isinstance(cached, CachedScorer):
        yield
        return
    before, cached.retry_errors = cached.retry_errors, True
    try:
        yield
    finally:
        cached.retry_errors = before
