"""The one way polytox opens its SQLite files: shared caches (``open_wal``) and files written once (``open_once``).

``open_wal`` (score cache, response archive, embedding cache, verified-file memo): WAL journal and
``synchronous=NORMAL``, so readers never block the writer and several processes can share one file safely;
autocommit (``isolation_level=None``), a 60 s busy timeout for a file another process is writing, and one
connection shared by threads under the caller's lock.

``open_once`` (the overlap index's texts): a file written by one process under a temporary name, renamed into
place, then only read. It keeps SQLite's default rollback journal, so no ``-wal`` file has to follow the
rename and a reader writes nothing, not even beside a file in a read-only folder.
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


def open_once(path: Path, schema: str = "", *, read_only: bool = False) -> sqlite3.Connection:
    """A connection to a written-once file: a fresh file (its folder created) with ``schema`` applied, or,
    with ``read_only``, the existing file opened for reading only."""
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    if schema:
        db.executescript(schema)
    return db
