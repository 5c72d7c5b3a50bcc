"""Content checksums of committed files: ``.NAME.sha256`` beside ``NAME``, in ``sha256sum`` format.

A file's damage that keeps its shape (one changed byte that still decodes, a page whose compressed bytes
still inflate) is invisible to a reader that only opens the file; its hash is not. ``commit`` writes the
checksum file (atomically) before the data file is renamed into place, so a committed file always has
its checksum beside it, and a checksum file without its data file means nothing (the file was never
committed). ``sha256sum -c .NAME.sha256`` checks one by hand. The name starts with a dot so that a
dataset reader given the folder (``pyarrow.parquet.read_table("RUN/generations")``, Spark) skips it, as it
skips the writers' temporary files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .atomic import atomic_write, atomic_write_text

SUFFIX = ".sha256"
_HEX = frozenset("0123456789abcdef")


def sidecar(path: Path) -> Path:
    """Where the checksum of ``path`` is kept."""
    return path.with_name(f".{path.name}{SUFFIX}")


def file_sha256(path: Path | str) -> str:
    """The hex SHA-256 of a file's bytes, read in blocks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def commit(path: Path, write: Callable[[str], None]) -> None:
    """``write(tmp)``, record the temporary file's hash in ``sidecar(path)``, then rename it to ``path``."""

    def write_and_hash(tmp: str) -> None:
        write(tmp)
        atomic_write_text(sidecar(path), f"{file_sha256(tmp)}  {path.name}\n")

    atomic_write(path, write_and_hash)


def record(path: Path) -> None:
    """Write the checksum of an existing file's current bytes (a file checked by other means first)."""
    atomic_write_text(sidecar(path), f"{file_sha256(path)}  {path.name}\n")


def recorded(path: Path) -> str | None:
    """The hash recorded for ``path``: None when no checksum file exists, "" when it is unreadable."""
    side = sidecar(path)
    try:
        text = side.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""
    fields = text.split()
    digest = fields[0] if fields else ""
    ok = len(digest) == 64 and _HEX.issuperset(digest)
    return digest if ok else ""


def problem(path: Path) -> str | None:
    """Why ``path``'s bytes differ from what was committed (None: they match, or no checksum is kept)."""
    digest = recorded(path)
    if digest is None:
        return None
    if digest == "":
        return f"has a damaged checksum file ({sidecar(path).name})"
    try:
        actual = file_sha256(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if actual != digest:
        return "does not match its checksum (its bytes changed after it was written)"
    return None


def json_digest(data: Any) -> str:
    """The hex SHA-256 of a JSON value in canonical form (sorted keys, no spaces): what a JSON file that
    carries its own checksum records, over every field but that one."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
