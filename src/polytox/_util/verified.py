"""Files that were verified, remembered by what the file system says of them, so a reader does not read and
hash an unchanged file again on every read.

A file is remembered with its stat identity: device, inode, size, ``mtime_ns`` and ``ctime_ns``. Any write
to the file moves its ctime, which no user call can set back (``touch -d`` sets mtime only), and a file
replaced by another (a copy, a rename over it) has another inode, so a changed file is never taken for the
one that was verified. One case remains, and is the one git's index guards against ("racy git"): a file
changed within the same clock tick as the write that the remembered stat shows would keep its stat. So a
file is remembered only when its last change is ``SETTLED_SECONDS`` old at the time it was hashed: a later
change then has a later timestamp. What was verified is remembered as a token the caller builds (the
digest its checksum file recorded and what else it was checked against), so an edited checksum file, or a
check against other expectations, is a miss too.

The table lives in the cache folder (``verified.sqlite``), never in the checked folder (readers write
nothing there). A cache that cannot be opened or written is skipped: every file is then hashed, as before.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from pathlib import Path

from .paths import default_cache_dir
from .sqlite import open_wal

FILE_NAME = "verified-v1.sqlite"
SETTLED_SECONDS = 2.0  # far above any file system's timestamp tick (ext4, xfs: the kernel's, ~4 ms; NFS: 1 s)
SCHEMA = "CREATE TABLE IF NOT EXISTS verified (path TEXT PRIMARY KEY, stat TEXT NOT NULL, token TEXT NOT NULL)"


@functools.lru_cache(maxsize=4096)
def _real_dir(folder: str) -> str:
    return os.path.realpath(folder)


def _key(path: Path) -> str:
    """``str(path.resolve())``, the folder resolved once per process: a run's parts share a few folders,
    and resolving each part walks every component of its path. A part that is itself a link is resolved
    in full."""
    name = str(path)
    if ".." in path.parts or os.path.islink(name):  # where a lexical absolute path could differ
        return str(path.resolve())
    folder, base = os.path.split(os.path.abspath(name))
    return os.path.join(_real_dir(folder), base)


def _stat(path: Path) -> tuple[str, float] | None:
    """The stat identity of ``path`` and the time of its last change (None: it cannot be read)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    return key, max(st.st_mtime_ns, st.st_ctime_ns) / 1e9


class VerifiedFiles:
    """The table of verified files (one connection, opened on first use)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                self._db = open_wal((self.folder or default_cache_dir()) / FILE_NAME, SCHEMA)
            except (OSError, sqlite3.Error):
                self._broken = True
        return self._db

    def known(self, path: Path, token: str) -> bool:
        """Whether ``path``, as it is now, was verified with ``token``."""
        stat, db = _stat(path), self._conn()
        if stat is None or db is None:
            return False
        try:
            row = db.execute("SELECT stat, token FROM verified WHERE path = ?", (_key(path),)).fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == stat[0] and row[1] == token

    def remember(self, path: Path, token: str, stat: tuple[str, float] | None) -> None:
        """Record that ``path`` was verified with ``token`` when its stat was ``stat`` (taken before it was
        read): only
        when that stat is still its stat and its last change had settled (see the module docstring)."""
        if stat is None or time.time() - stat[1] < SETTLED_SECONDS or _stat(path) != stat:
            return
        db = self._conn()
        if db is None:
            return
        with contextlib.suppress(sqlite3.Error):  # a read-only or full cache: the file is hashed next time
            db.execute(
                "INSERT OR REPLACE INTO verified (path, stat, token) VALUES (?, ?, ?)",
                (_key(path), stat[0], token),
            )


def stat_of(path: Path) -> tuple[str, float] | None:
    """What ``VerifiedFiles.remember`` needs, taken before the file is hashed."""
    return _stat(path)
