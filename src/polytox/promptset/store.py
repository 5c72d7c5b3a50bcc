"""The build directory: every stage writes as it goes, atomically, so a killed build resumes.

Layout::

    OUT/
      build.json                         spec, spec hash, versions, platform, status, counters and reports
      scan/docs/part-00000.parquet       scored units of input shard 0 (DOCUMENT_SCHEMA)
      scan/rejected/part-00000.parquet   what the steps dropped from shard 0, with reasons
      scan/done/part-00000.json          completion marker (written last) with the shard's counters
      translated/<lang>/part-00000.parquet   machine-translated units (+ rejected-00000.parquet, .json)
      selected.parquet                   the stratified sample, in output order
      split/part-00000.parquet           prompts/continuations of selected shard 0, scored (+ .json marker)
      ptp.jsonl ptp.parquet rtp.jsonl rtp.parquet          the prompt set in both schemas
      small/ptp.jsonl small/ptp.parquet small/rtp.jsonl small/rtp.parquet   the PTP_SMALL-like subset
      report.json report.md              counters, shortfall, translation correlation
      stats/                             ``polytox build stats`` output

A part is complete once its marker exists; a rerun skips complete parts and redoes the rest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util.atomic import atomic_write, atomic_write_json
from .._util.runlock import LOCK_NAME
from ..errors import PolytoxError, SpecMismatchError
from ..store import git_commit, now, package_versions, platform_info, spec_diff
from .document import Document, Rejected, documents_table, rejected_table
from .spec import BuildSpec

BUILD_MANIFEST = "build.json"


def write_table(path: Path, table: pa.Table) -> None:
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_json(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


class BuildStore:
    """A build directory; see the module docstring."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    # ---- manifest -------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.path / BUILD_MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def manifest(self) -> dict[str, Any]:
        if not self.exists():
            raise PolytoxError(f"{self.path} is not a polytox build directory (no {BUILD_MANIFEST})")
        try:
            return read_json(self.manifest_path)
        except ValueError as exc:
            raise PolytoxError(f"{self.manifest_path} is damaged ({exc}); delete {self.path} to build again") from exc

    def open(self, spec: BuildSpec) -> bool:
        """Create the build, or check an existing one has the same spec. True when resuming."""
        if self.exists():
            stored = self.manifest()
            if stored.get("spec_hash") != spec.spec_hash():
                diffs = spec_diff(stored.get("spec", {}), json.loads(json.dumps(spec.to_dict(), default=str)))
                raise SpecMismatchError(
                    f"{self.path} holds a build with a different spec; refusing to resume it.\n  "
                    + "\n  ".join(diffs)
                    + "\nUse another --out, or delete the directory to start over."
                )
            stored.setdefault("resumed_at", []).append(now())
            stored["status"] = "running"
            atomic_write_json(self.manifest_path, stored)
            return True
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            self.manifest_path,
            {
                "polytox_build": 1,
                "spec": spec.to_dict(),
                "spec_hash": spec.spec_hash(),
                "created_at": now(),
                "status": "running",
                "versions": package_versions(),
                "platform": platform_info(),
                "git_commit": git_commit(),
            },
        )
        return False

    def discard(self) -> None:
        """Remove what this build wrote (its folder's content but the lock file): called when the input is
        refused after ``open`` created the build, so the corrected command is not refused as a resume."""
        import shutil

        for path in self.path.iterdir():
            if path.name == LOCK_NAME:
                continue
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest()
        data.update(fields)
        atomic_write_json(self.manifest_path, data)

    # ---- scan -----------------------------------------------------------------------------------
    def scan_docs(self, shard: int) -> Path:
        return self.path / "scan" / "docs" / f"part-{shard:05d}.parquet"

    def scan_rejected(self, shard: int) -> Path:
        return self.path / "scan" / "rejected" / f"part-{shard:05d}.parquet"

    def scan_marker(self, shard: int) -> Path:
        return self.path / "scan" / "done" / f"part-{shard:05d}.json"

    def scan_done(self, shard: int) -> dict[str, Any] | None:
        """The shard's marker (counters), or None when the shard has not completed."""
        marker = self.scan_marker(shard)
        return read_json(marker) if marker.exists() else None

    def write_scan(
        self, shard: int, docs: Sequence[Document], rejected: Sequence[Rejected], marker: dict[str, Any]
    ) -> None:
        """Write the shard's parts, then its marker: a shard is done only once all three exist."""
        write_table(self.scan_docs(shard), documents_table(docs))
        write_table(self.scan_rejected(shard), rejected_table(rejected))
        atomic_write_json(self.scan_marker(shard), marker)

    def scan_markers(self) -> list[dict[str, Any]]:
        folder = self.path / "scan" / "done"
        return [read_json(p) for p in sorted(folder.glob("part-*.json"))] if folder.exists() else []

    def scan_doc_parts(self) -> list[Path]:
        """Scored units of every completed scan shard, in shard order."""
        done = {p.stem for p in (self.path / "scan" / "done").glob("part-*.json")}
        return sorted(p for p in (self.path / "scan" / "docs").glob("part-*.parquet") if p.stem in done)

    def doc_parts(self) -> list[Path]:
        """Scored units of every completed scan shard, then every translated part, in a stable order."""
        return self.scan_doc_parts() + self.translated_parts()

    def rejected_parts(self) -> list[Path]:
        scan = sorted((self.path / "scan" / "rejected").glob("part-*.parquet"))
        return scan + sorted((self.path / "translated").glob("*/rejected-*.parquet"))

    # ---- translation ----------------------------------------------------------------------------
    def translated_dir(self, lang: str) -> Path:
        return self.path / "translated" / lang

    def translated_parts(self) -> list[Path]:
        root = self.path / "translated"
        return sorted(p for p in root.glob("*/part-*.parquet") if p.with_suffix(".json").exists())

    def write_translated(
        self, lang: str, shard: int, docs: Sequence[Document], rejected: Sequence[Rejected], marker: dict[str, Any]
    ) -> None:
        folder = self.translated_dir(lang)
        write_table(folder / f"part-{shard:05d}.parquet", documents_table(docs))
        write_table(folder / f"rejected-{shard:05d}.parquet", rejected_table(rejected))
        atomic_write_json(folder / f"part-{shard:05d}.json", marker)

    def translated_marker(self, lang: str, shard: int) -> dict[str, Any] | None:
        path = self.translated_dir(lang) / f"part-{shard:05d}.json"
        return read_json(path) if path.exists() else None

    # ---- selection and split --------------------------------------------------------------------
    @property
    def selected_path(self) -> Path:
        return self.path / "selected.parquet"

    def split_part(self, shard: int) -> Path:
        return self.path / "split" / f"part-{shard:05d}.parquet"

    def split_marker(self, shard: int) -> Path:
        return self.path / "split" / f"part-{shard:05d}.json"

    def split_parts(self, n: int) -> list[Path]:
        return [self.split_part(i) for i in range(n)]

    def clear_split_from(self, n: int) -> None:
        """Remove split parts past ``n`` (left over from an earlier, larger selection)."""
        folder = self.path / "split"
        for path in folder.glob("part-*"):
            if int(path.name[5:10]) >= n:
                path.unlink()

    # ---- outputs --------------------------------------------------------------------------------
    def output(self, name: str) -> Path:
        return self.path / name

    def report_paths(self) -> tuple[Path, Path]:
        return self.path / "report.json", self.path / "report.md"


def iter_parquet_rows(
    paths: Iterable[Path], columns: list[str] | None = None, batch_size: int = 2048
) -> Iterable[dict[str, Any]]:
    """Rows of several Parquet files, streamed batch by batch."""
    for path in paths:
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
            yield from batch.to_pylist()
