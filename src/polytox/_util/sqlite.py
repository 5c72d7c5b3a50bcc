"""The one way polytox opens its persistent SQLite files (score cache, response archive, embedding cache).

WAL journal and ``synchronous=NORMAL``: readers never block the writer and several processes can share one
file safely; autocommit (``isolation_level=None``), a 60 s busy timeout for a file another process is
writing, and one connection shared by threads under the caller's lock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_wal(path: Path, schema: str) -> sqlite3.Connection:
    """A connection to ``path`` (its folder and the file created if missing) with ``schema`` applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(schema)
    return db
