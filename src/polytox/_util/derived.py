"""Numbers derived from a run's files, computed once and kept beside them with what they were computed from.

A derived file (``RUN/derived/NAME.json``) holds ``settings`` (what the numbers depend on besides the
files: options, the code's version), ``inputs`` (each input file's identity, ``identity``) and ``values``,
with the SHA-256 of the three. ``memo`` returns the kept values only when the file parses, matches its own
digest, and names exactly the current settings and inputs; otherwise it computes them and rewrites the
file atomically. A stale, edited or torn derived file is never trusted, only replaced. Where the folder
cannot be written (a read-only run), the values are computed and returned, not kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from . import checksum
from .atomic import atomic_write_text

# Recorded hashes already read in this process, by checksum file and that file's (size, time, inode):
# one command asks for the same part's identity several times (metrics, text stats, pairs).
_RECORDED: dict[str, tuple[tuple[int, int, int], str | None]] = {}


def _recorded(path: str) -> str | None:
    """``checksum.recorded(path)``, read again only when the checksum file's size, time or inode changed."""
    folder, name = os.path.split(path)
    side = os.path.join(folder, f".{name}{checksum.SUFFIX}")  # ``checksum.sidecar`` without pathlib's cost
    try:
        stat = os.stat(side)
    except FileNotFoundError:
        return None
    key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    seen = _RECORDED.get(side)
    if seen is not None and seen[0] == key:
        return seen[1]
    digest = checksum.recorded(Path(path))
    _RECORDED[side] = (key, digest)
    return digest


def identity(path: Path | str) -> str:
    """What a derived number trusts a file by: the SHA-256 recorded with it (``-`` when none was kept),
    its size and its modification time in ns: a repaired or rewritten file differs in all three, a file
    changed in place at least in its time."""
    stat = os.stat(path)
    return f"{_recorded(str(path)) or '-'}:{stat.st_size}:{stat.st_mtime_ns}"


def identities(root: Path, files: Iterable[Path]) -> dict[str, str]:
    """``files`` (under ``root``) by their path relative to ``root`` -> ``identity``; absent files are left out.
    (Thousands of parts per run: plain strings, not ``Path`` objects, on the way.)"""
    base = os.path.join(str(root), "")
    out: dict[str, str] = {}
    for name in sorted(map(str, files)):
        relative = name[len(base) :] if name.startswith(base) else Path(name).relative_to(root).as_posix()
        with contextlib.suppress(FileNotFoundError):
            out[relative.replace(os.sep, "/")] = identity(name)
    return out


def key(settings: Mapping[str, Any]) -> str:
    """A short file-name-safe key of ``settings`` (one derived file per distinct settings)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def trusted(path: Path, settings: Mapping[str, Any], inputs: Mapping[str, str]) -> dict[str, Any] | None:
    """The kept values when ``path`` parses, matches its digest and names these settings and inputs."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    body = {name: data.get(name) for name in ("settings", "inputs", "values")}
    if data.get("sha256") != _digest(body):
        return None
    if body["settings"] != json.loads(json.dumps(settings)) or body["inputs"] != dict(inputs):
        return None
    values = body["values"]
    return values if isinstance(values, dict) else None


def memo(
    path: Path,
    settings: Mapping[str, Any],
    inputs: Callable[[], Mapping[str, str]],
    compute: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The values kept in ``path`` when current, else ``compute()``, kept there. ``inputs`` is called
    before and after computing: when a file changed meanwhile, the values are returned but not kept."""
    before = dict(inputs())
    kept = trusted(path, settings, before)
    if kept is not None:
        return kept
    values = compute()
    if dict(inputs()) != before:
        return values
    body = {"settings": settings, "inputs": before, "values": values}
    text = json.dumps({**body, "sha256": _digest(json.loads(json.dumps(body)))}, indent=1) + "\n"
    with contextlib.suppress(OSError):  # a read-only run: the numbers are right, only not kept
        atomic_write_text(path, text)
    return values
