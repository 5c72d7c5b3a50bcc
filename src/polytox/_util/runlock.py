"""One writer per output: an exclusive advisory lock (``flock``) on a lock file that names its holder.

Two writers into one run directory would mix two runs under one manifest, so every command that writes an
output folder (or file) holds this lock for as long as it writes. The kernel releases a ``flock`` when its
process dies, however it dies (kill -9 included), so a lock left by a dead process is never stale: the
next writer simply gets it, and no pid-liveness guess (fooled by pid reuse) is needed. The lock file holds
the holder's pid, host and start time, read only to name the holder in the refusal.

A SIGTERM (``kill``, a batch system's time limit) ends the holder as an exception would (exit 143), so
every writer's clean-up of its temporary file runs, and the release (at the latest at interpreter exit);
the handler is installed only while the lock is held, from the main thread, and only where SIGTERM still
has its default action.

The lock file is removed on release (unlinked while still locked; an acquirer that locked an unlinked
file sees that its inode is no longer the path's and tries again), and so is a folder created only to
hold it, so a refused or finished command leaves nothing of the lock behind. Readers never take it: every
part is written to a temporary name and renamed, so a reader sees committed parts only.
"""

from __future__ import annotations

import atexit
import datetime as dt
import fcntl
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

from ..errors import PolytoxError

LOCK_NAME = ".polytox.lock"


class LockedError(PolytoxError):
    """Another live process writes the same output."""


def _holder(path: Path) -> dict[str, object]:
    """What the lock file says about its holder; it may be empty for a moment after the holder locked it."""
    for _ in range(20):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            text = ""
        if text.strip():
            try:
                data = json.loads(text)
                return data if isinstance(data, dict) else {}
            except ValueError:
                pass
        time.sleep(0.02)
    return {}


def _describe(holder: dict[str, object]) -> str:
    pid = holder.get("pid")
    who = f"pid {pid}" if pid else "another process"
    if holder.get("host") and holder.get("host") != socket.gethostname():
        who += f" on {holder['host']}"
    started = holder.get("started")
    if isinstance(started, str):
        try:
            when = dt.datetime.fromisoformat(started).astimezone()
            fmt = "%H:%M:%S" if when.date() == dt.date.today() else "%Y-%m-%d %H:%M"
            who += f" (started {when.strftime(fmt)})"
        except ValueError:
            pass
    return who


def held(folder: Path | str) -> bool:
    """Whether a live process holds the write lock of ``folder`` (read-only: never creates the lock file)."""
    try:
        fd = os.open(Path(folder) / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class OutputLock:
    """The write lock of ``target`` (a folder: ``target/.polytox.lock``; a file: ``.NAME.lock`` beside it).

    ``acquire`` refuses at once, with one line naming the holder, when another process holds it; folders
    it had to create for the lock file are removed again on release when they are still empty.
    """

    def __init__(self, target: Path | str, kind: str = "dir", flag: str = "--out") -> None:
        self.target = Path(target)
        self.kind = kind
        self.flag = flag
        folder = self.target if kind == "dir" else self.target.parent
        self.lock_path = folder / (LOCK_NAME if kind == "dir" else f".{self.target.name}.lock")
        self._fd: int | None = None
        self._created: list[Path] = []
        self._sigterm: object = None  # the handler replaced while the lock is held (None: none replaced)

    def _make_folders(self) -> None:
        missing = []
        folder = self.lock_path.parent
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:
                continue
            self._created.append(path)

    def acquire(self) -> OutputLock:
        if self._fd is not None:
            return self
        self._make_folders()
        while True:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:  # a folder (or something else that is not a file) at the lock's path
                self._remove_created()
                what = "is a folder" if self.lock_path.is_dir() else f"cannot be opened ({exc.strerror or exc})"
                raise PolytoxError(
                    f"{self.target}: its write lock {self.lock_path} {what}; remove it (no polytox process "
                    "makes one there) and rerun"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._remove_created()
                raise LockedError(
                    f"{self.target} is in use by {_describe(_holder(self.lock_path))}; wait for it "
                    f"to finish or use another {self.flag}"
                ) from None
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder released (and unlinked) it between our open and our lock: try again
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(info) + "\n").encode())
        self._fd = fd
        self._catch_sigterm()
        return self

    def _catch_sigterm(self) -> None:
        """Turn SIGTERM into ``SystemExit(143)`` while the lock is held, so ``release`` runs."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def stop(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        self._sigterm = signal.signal(signal.SIGTERM, stop)
        atexit.register(self.release)  # a holder that never reaches ``release`` (no ``with``) still frees it

    def release(self) -> None:
        if self._fd is None:
            return
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            atexit.unregister(self.release)
            self._sigterm = None
        try:
            self.lock_path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None
        self._remove_created()

    def _remove_created(self) -> None:
        for path in reversed(self._created):
            try:
                path.rmdir()  # only when empty: a run that wrote something keeps its folder
            except OSError:
                break
        self._created = []

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
