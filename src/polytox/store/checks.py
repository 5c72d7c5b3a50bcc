"""Whether one stored part can be trusted: its checksum, or (a run made before checksums were kept) that it
decodes; its row count, prompt ids and the spec hash it records. A part that passes may be remembered
unchanged in the verified-files memo (``_util.verified``, kept in the cache folder, never in the run)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq

from .._util import checksum
from .._util.verified import VerifiedFiles, stat_of
from .files import read_parquet


def part_problem(
    path: Path,
    rows: int | None = None,
    ids: set[str] | None = None,
    key: tuple[str, str] | None = None,
    full: bool = True,
    checksummed: bool = False,
    verified: VerifiedFiles | None = None,
    trust: bool = False,
) -> str | None:
    """Why a stored part cannot be trusted, or None.

    Its bytes must match the checksum written with it (``checksummed``: the run records checksums, so a
    part without one is damage too). A part with no checksum (a run made before checksums were kept) must
    open (``full``: every column of every row is decoded, not only the footer). Then, either way, it must
    hold ``rows`` rows of the prompts ``ids`` and carry the hash ``key`` = (name, value) when it records one
    (parts written before hashes were recorded carry none), so another shard's or another run's part,
    even with its own checksum, is not read as this shard's.

    With ``verified``, a part that passes is remembered, unchanged since, with its checksum and these
    expectations (``_util.verified``); with ``trust`` as well (the readers), such a part is not read again.
    ``--verify`` and the resume read every part."""
    digest = checksum.recorded(path)
    token = f"{digest}:{expectation(rows, ids, key)}" if digest and verified is not None else None
    if token is not None and verified is not None:
        if trust and verified.known(path, token):
            return None
        stat = stat_of(path)  # taken before the bytes are read: a change while they are read is not remembered
    why = part_checks(path, rows, ids, key, full, checksummed)
    if why is None and token is not None and verified is not None:
        verified.remember(path, token, stat)
    return why


def expectation(rows: int | None, ids: set[str] | None, key: tuple[str, str] | None) -> str:
    """A short hash of what a part was checked against (its row count, prompt ids and spec hash)."""
    blob = json.dumps([rows, sorted(ids) if ids is not None else None, key], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def part_checks(
    path: Path,
    rows: int | None,
    ids: set[str] | None,
    key: tuple[str, str] | None,
    full: bool,
    checksummed: bool,
) -> str | None:
    """``part_problem``'s checks, every one of them (see there)."""
    if checksum.recorded(path) is not None:
        why = checksum.problem(path)
        if why is not None:
            return why
        full = False  # the bytes are those written: the footer and the ids say the rest
    elif checksummed:
        return f"has no checksum ({checksum.sidecar(path).name} is missing)"
    try:
        meta = pq.read_metadata(path)
        table = read_parquet(path) if full else None
        if table is None and ids is not None:
            table = read_parquet(path, columns=["prompt_id"])
    except Exception as exc:  # pyarrow raises several kinds (ArrowInvalid, OSError) for a torn file
        return f"does not open ({' '.join(str(exc).split())[:160]})"
    if rows is not None and meta.num_rows != rows:
        return f"holds {meta.num_rows} row(s), {rows} expected"
    if ids is not None and table is not None and set(table.column("prompt_id").to_pylist()) != ids:
        return "holds other prompts than its shard"
    stored = (meta.metadata or {}).get(f"polytox.{key[0]}".encode()) if key else None
    if key and stored is not None and stored.decode() != key[1]:
        return f"was made for another spec ({key[0]} {stored.decode()}, this run's is {key[1]})"
    return None
