"""Atomic file writes: write a temporary file in the same directory, fsync, then rename over the target.

A reader (or a resumed run) sees either the old file or the complete new one, never a torn write, even
after SIGKILL or power loss. The file gets the mode a plain ``open`` would give it (0666 less the umask),
not the 0600 of a temporary file, so a group-shared output folder stays readable to the group.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


TMP_PREFIX = ".tmp-"  # a temporary file's name starts with it; one left behind means its writer was killed


def file_mode() -> int:
    """The mode ``open`` gives a new file: 0666 less the process's umask (read without changing it on Linux;
    elsewhere set and restored once, then remembered: changing it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            mask = next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = _umask_once()
    return 0o666 & ~mask


@functools.cache
def _umask_once() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` then atomically move the result to ``path`` (with the umask's mode)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}-", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, file_mode())
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    atomic_write(path, write)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
