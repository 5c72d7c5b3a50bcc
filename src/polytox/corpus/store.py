"""The output folder of ``corpus score``: a manifest and one Parquet part per shard, each written atomically.

``OUT/manifest.json`` holds what the parts were computed from (source, field map, scorer id and
attributes, shard size, byte budget); a rerun with the same ``--out`` and other settings is refused rather
than mixing two scorings. ``OUT/parts/part-NNNNN.parquet`` holds shard NNNNN: documents
``[NNNNN * shard_size, (NNNNN + 1) * shard_size)`` of the stream, every one of them, scored or not. A
part is either complete or absent (temp file + rename), so a killed run loses at most the shards in
flight and a rerun computes exactly the missing ones: nothing lost, nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util.atomic import atomic_write, atomic_write_json
from ..errors import PolytoxError

MANIFEST = "manifest.json"
PARTS = "parts"

BASE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("doc_id", pa.string()),
    ("location", pa.string()),
    ("url", pa.string()),
    ("domain", pa.string()),
    ("lang", pa.string()),
    ("lang_source", pa.string()),
    ("length_chars", pa.int64()),
    ("length_bytes", pa.int64()),
    ("status", pa.string()),
    ("truncated", pa.bool_()),
    ("error", pa.string()),
    ("transient", pa.bool_()),
    ("scorer", pa.string()),
]


def meta_column(name: str) -> str:
    """The Parquet column of a kept metadata field (``meta.subreddit`` -> ``meta_meta_subreddit``)."""
    return "meta_" + re.sub(r"[^0-9A-Za-z_]", "_", name)


def part_schema(attributes: Sequence[str], keep: Sequence[str]) -> pa.Schema:
    return pa.schema(
        BASE_FIELDS + [(a, pa.float64()) for a in attributes] + [(meta_column(k), pa.string()) for k in keep]
    )


class ScoreStore:
    """``OUT/manifest.json`` + ``OUT/parts/part-NNNNN.parquet``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.parts = self.path / PARTS
        self.created = False  # set by ``open`` when it wrote a new manifest

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def part_path(self, index: int) -> Path:
        return self.parts / f"part-{index:05d}.parquet"

    def glob(self) -> str:
        return str(self.parts / "part-*.parquet")

    def has_part(self, index: int) -> bool:
        return self.part_path(index).exists()

    def part_files(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.parquet"))

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            raise PolytoxError(f"{self.path} is not a 'polytox corpus score' output (no {MANIFEST})")
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PolytoxError(f"{self.manifest_path} is damaged ({exc}); delete {self.path} to score again") from exc
        if not isinstance(data, dict):
            raise PolytoxError(f"{self.manifest_path} is damaged (not a JSON object)")
        return data

    def open(self, identity: dict[str, Any]) -> bool:
        """Start or resume; returns True when resuming. Refuses a folder scored with other settings."""
        if self.manifest_path.exists():
            old = self.manifest().get("identity")
            if old != json.loads(json.dumps(identity, default=str)):
                raise PolytoxError(
                    f"{self.path} holds a scoring with other settings ({old}); use another --out "
                    "or the same settings to resume"
                )
            return True
        atomic_write_json(self.manifest_path, {"identity": identity, "complete": False})
        self.created = True
        return False

    def discard_if_new(self) -> None:
        """Undo ``open`` of a new output that holds no part yet: a refused command leaves nothing behind."""
        if not self.created or self.part_files():
            return
        self.manifest_path.unlink(missing_ok=True)
        for folder in (self.parts, self.path):
            with contextlib.suppress(OSError):  # only when empty
                folder.rmdir()
        self.created = False

    def update(self, **fields: Any) -> None:
        data = self.manifest()
        data.update(fields)
        atomic_write_json(self.manifest_path, data)

    def write_part(self, index: int, table: pa.Table) -> None:
        atomic_write(self.part_path(index), lambda tmp: pq.write_table(table, tmp, compression="zstd"))

    def remove_if_damaged(self, index: int, rows: int) -> str | None:
        """Remove part ``index`` when it does not open or does not hold ``rows`` documents (a disk that filled
        up, a copy cut short), so the shard is scored again; returns the reason, logged as a repair."""
        from ..store.checks import part_problem

        path = self.part_path(index)
        why = part_problem(path, rows)
        if why is not None:
            path.unlink()
            logging.getLogger("polytox").warning("repaired: %s %s: removed, scored again", path, why)
        return why

    def has_transient(self, index: int) -> bool:
        column = pq.read_table(self.part_path(index), columns=["transient"]).column("transient")
        return bool(pa.compute.any(column).as_py())
