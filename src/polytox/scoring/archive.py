"""An append-only archive of raw API responses (Perspective), beside the score cache.

The score cache keeps the values polytox reads; this archive keeps each whole response body (span
scores, detected languages, the API's error reason) with the text's hash, the language hint sent and the
time, because Perspective's models changed silently over the years and the service ends on
31 December 2026: after that the archive is the only record of what it said. Texts themselves and the
API key are never stored.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from .._util.sqlite import open_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  created REAL NOT NULL,
  endpoint TEXT NOT NULL,
  text_sha256 TEXT NOT NULL,
  lang_sent TEXT,
  attributes TEXT NOT NULL,
  status INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_text ON responses (text_sha256);
"""


class ResponseArchive:
    """Thread-safe appends of (endpoint, text hash, language sent, attributes, HTTP status, body)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_wal(self.path, SCHEMA)

    def add(
        self, endpoint: str, text_sha256: str, lang_sent: str | None, attributes: str, status: int, body: str
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO responses VALUES (?,?,?,?,?,?,?)",
                (time.time(), endpoint, text_sha256, lang_sent, attributes, status, body),
            )

    def count(self, status: int | None = None) -> int:
        with self._lock:
            if status is None:
                row = self._db.execute("SELECT count(*) FROM responses").fetchone()
            else:
                row = self._db.execute("SELECT count(*) FROM responses WHERE status = ?", (status,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
