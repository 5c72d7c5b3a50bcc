"""A run's numbers derived from its continuation texts, computed once and kept in ``RUN/derived.json``.

Distinct-n (``diversity.py``), the mean tokens per continuation and the share of empty continuations
depend on every stored continuation: reading 500K texts takes seconds, so they are computed when the run
is finished (``detox_metrics``) or first read, and stored with the identity of each generation part they
were computed from: its recorded SHA-256 (the checksum file written with it), its size and its
modification time. A reader recomputes them, and rewrites the file atomically, when any part differs
(added, removed, repaired, rewritten), when the settings they depend on differ (``DISTINCT_N``), or when
the file does not parse or does not match its own digest: a stale or damaged derived file is never
trusted. A run directory that cannot be written (read-only) still gets its numbers, computed on every
read.

Each generation part is read once, for the three numbers together (prompt id, text and token count only).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import constants as C
from .._util import checksum
from .._util.atomic import atomic_write_text
from ..store import RunStore
from .diversity import diversity

DERIVED_FILE = "derived.json"
VERSION = 1  # bump when what is computed changes: a file of another version is recomputed


def part_identity(part: Path) -> str:
    """What a derived number trusts a part by: its recorded SHA-256 (``-`` for a run made before checksums
    were kept), its size and its modification time in ns."""
    stat = part.stat()
    return f"{checksum.recorded(part) or '-'}:{stat.st_size}:{stat.st_mtime_ns}"


def input_identities(store: RunStore) -> dict[str, str]:
    """Part file name -> identity, for every generation part of the run (sorted by name)."""
    parts = sorted((store.path / "generations").glob("part-*.parquet"))
    return {p.name: part_identity(p) for p in parts}


def _settings() -> dict[str, Any]:
    return {"version": VERSION, "distinct_n": list(C.DISTINCT_N), "tokens": "whitespace"}


def compute_text_stats(store: RunStore) -> dict[str, Any]:
    """``{"diversity": {...}, "lengths": {"mean_tokens", "empty_share"}}`` from the generation parts, each
    read once, in part order (so the float sums are the same on every call)."""
    import pyarrow.parquet as pq

    per_prompt: dict[str, list[str | None]] = {}
    n_text = tokens = empty = 0
    for part in sorted((store.path / "generations").glob("part-*.parquet")):
        table = pq.read_table(part, columns=["prompt_id", "text", "n_tokens"])
        ids = table.column("prompt_id").to_pylist()
        texts = table.column("text").to_pylist()
        n_tokens = table.column("n_tokens").to_pylist()
        for pid, text, n in zip(ids, texts, n_tokens, strict=True):
            per_prompt.setdefault(pid, []).append(text)
            if text is not None:  # a failed generation has no length, it is not an empty one
                n_text += 1
                tokens += int(n or 0)
                empty += not text.strip()
    lengths = {
        "mean_tokens": tokens / n_text if n_text else None,
        "empty_share": empty / n_text if n_text else None,
    }
    return {"diversity": diversity(per_prompt), "lengths": lengths}


def _digest(body: Mapping[str, Any]) -> str:
    """SHA-256 of the file's content (settings, inputs, values) in canonical JSON: an edited or torn
    file does not match it."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _trusted(path: Path, inputs: Mapping[str, str]) -> dict[str, Any] | None:
    """The stored numbers when the file parses, matches its own digest and names exactly these inputs and
    settings; else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    body = {key: data.get(key) for key in ("settings", "inputs", "values")}
    if data.get("sha256") != _digest(body) or body["settings"] != _settings() or body["inputs"] != dict(inputs):
        return None
    values = body["values"]
    if not isinstance(values, dict) or not all(isinstance(values.get(k), dict) for k in ("diversity", "lengths")):
        return None
    return values


def text_stats(store: RunStore) -> dict[str, Any]:
    """The run's text-derived numbers: from ``derived.json`` when it matches the stored generation parts,
    else computed and stored there (atomically; skipped where the run directory cannot be written)."""
    path = store.path / DERIVED_FILE
    inputs = input_identities(store)
    values = _trusted(path, inputs)
    if values is not None:
        return values
    values = compute_text_stats(store)
    if inputs != input_identities(store):  # a part changed while it was read: keep nothing for it
        return values
    body = {"settings": _settings(), "inputs": inputs, "values": values}
    with contextlib.suppress(OSError):  # a read-only run: the numbers are right, only not kept
        atomic_write_text(path, json.dumps({**body, "sha256": _digest(body)}, indent=1) + "\n")
    return values
