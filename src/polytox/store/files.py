"""The run directory's file formats: the Parquet schemas, the manifest's format constants, and the helpers
that read and write one file of a run (a Parquet part with its checksum, a JSON object file) or name one
(a scorer's folder, a part's shard). Shared by the reader and the writer; holds no run state."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util import checksum
from ..errors import DamagedRunError
from ..spec import EvalSpec

GENERATION_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("sample_index", pa.int32()),
        ("text", pa.string()),
        ("finish_reason", pa.string()),
        ("n_tokens", pa.int32()),
        ("prompt_truncated", pa.bool_()),
        ("error", pa.string()),
    ]
)

PROMPT_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("position", pa.int64()),
        ("text", pa.string()),
        ("lang", pa.string()),
        ("toxicity", pa.float64()),
        ("bucket", pa.int8()),
        ("source", pa.string()),
        ("meta_json", pa.string()),
    ]
)

MANIFEST_FORMAT = 2  # the manifest's ``polytox_run``; earlier layouts are read through ``migrate_manifest``
MANIFEST_DIGEST = "manifest_sha256"  # the manifest's own checksum (format 2 on), over every other field
CHECKSUM = "sha256"  # the manifest's ``checksums``: each part has a ``NAME.sha256`` beside it (_util.checksum)


def slug(name: str) -> str:
    """A filesystem-safe directory name for a scorer id."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def spec_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two specs' identities differ, one ``field: stored X, requested Y`` line per leaf."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += spec_diff(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return out
    # Compare as the spec hash does (JSON), so 1 and 1.0 count as different here too and the message
    # can never be empty while the hashes differ.
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    return [] if same else [f"{path}: stored {a!r}, requested {b!r}"]


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file read as a table. ``ParquetFile`` reads it without ``pq.read_table``'s dataset layer,
    which imports pandas (about 0.2 s of every reading command's start)."""
    with pq.ParquetFile(path) as handle:
        return handle.read(columns=columns)


def write_parquet(path: Path, table: pa.Table, meta: dict[str, str] | None = None) -> None:
    if meta:
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), **{f"polytox.{k}".encode(): v.encode() for k, v in meta.items()}}
        )
    checksum.commit(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def generation_key(spec: EvalSpec) -> str:
    """The hash of what determines a run's generations: the spec's identity but the scorer and the prompt
    source (``eval --generations-from`` may change both; the prompts themselves are checked by id)."""
    identity = spec.identity()
    identity.pop("scorer")
    identity.pop("prompts")
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object file; an empty, cut or non-object file raises ``DamagedRunError`` naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except ValueError as exc:
        why = "empty file" if path.stat().st_size == 0 else f"not valid JSON: {exc}"
        raise DamagedRunError(f"{path} is damaged ({why})", path) from exc
    if not isinstance(data, dict):
        raise DamagedRunError(f"{path} is damaged (not a JSON object)", path)
    return data


def repair_command(out: Path | str) -> str:
    """The command that repairs a damaged run: the resume, with the spec the run recorded."""
    return f"polytox eval --out {shlex.quote(str(out))}"


def shard_index(part: Path) -> int | None:
    """The shard number of ``part-NNNNN.parquet`` (None: not a part name)."""
    match = re.fullmatch(r"part-(\d+)\.parquet", part.name)
    return int(match.group(1)) if match else None
