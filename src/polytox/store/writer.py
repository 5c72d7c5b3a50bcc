"""``RunStore``: a run directory opened to write (the runner's, the importer's; one writer at a time, under
the run's lock, ``_util.runlock``). It opens or resumes a run (checking the spec), writes the manifest, the
prompts, each shard's generation and score parts and ``metrics.json`` atomically with their checksums, and
repairs on resume (``repair``). It reads as ``RunReader`` does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from .._util import checksum
from .._util.atomic import atomic_write_json
from ..errors import DamagedRunError, PolytoxError, SpecMismatchError
from ..spec import EvalSpec
from ..types import Generation, Prompt, Score, raw_name
from . import repair
from .checks import part_problem
from .files import (
    CHECKSUM,
    GENERATION_SCHEMA,
    MANIFEST_DIGEST,
    MANIFEST_FORMAT,
    PROMPT_SCHEMA,
    generation_key,
    read_parquet,
    spec_diff,
    write_parquet,
)
from .manifest import manifest_spec
from .provenance import git_commit, now, package_versions, platform_info
from .reader import RunReader


def write_manifest_file(path: Path, data: dict[str, Any]) -> None:
    """Write a manifest atomically, in the current format, with its checksum in ``MANIFEST_DIGEST``: the
    digest is taken over the JSON as it will be read back, so any later edit of any field is found."""
    plain = json.loads(json.dumps({k: v for k, v in data.items() if k != MANIFEST_DIGEST}, default=str))
    plain["polytox_run"] = MANIFEST_FORMAT
    plain[MANIFEST_DIGEST] = checksum.json_digest(plain)
    atomic_write_json(path, plain)


class RunStore(RunReader):
    """A run directory opened to write; see ``polytox.store`` for its layout."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(path)
        self.spec_record: str | None = None  # the spec ``prompts.parquet`` records (set by ``open``)

    def _meta(self, *names: str) -> dict[str, str]:
        values = {"spec": self.spec_record, "spec_hash": self.spec_hash, "generation_key": self.generation_key}
        return {name: value for name in names if (value := values[name]) is not None}

    def open(self, spec: EvalSpec, extra: dict[str, Any] | None = None) -> bool:
        """Create the run, or check that an existing one has the same spec. Returns True when resuming.

        A damaged manifest is rebuilt when the spec recorded in ``prompts.parquet`` is this spec (its
        ``rebuilt_at`` says when), and refused with one line when nothing records the spec."""
        self.spec_hash, self.generation_key = spec.spec_hash(), generation_key(spec)
        self.spec_record = json.dumps(spec.to_dict(), sort_keys=True, default=str)
        stored: dict[str, Any] | None = None
        rebuilt = False
        if self.exists() or self.stored_anything():
            try:
                stored = self.manifest()
            except DamagedRunError as exc:
                rebuilt = repair.rebuild_or_refuse(self, spec, exc)
                if rebuilt:
                    # a rebuilt manifest says checksums are kept only where the run kept them from its start
                    kept = checksum.sidecar(self.prompts_path).exists()
                    self._write_new_manifest(spec, extra, checksummed=kept, rebuilt_at=[now()])
                    return True
        if stored is not None:
            old = manifest_spec(self.manifest_path, stored)
            if old.spec_hash() != spec.spec_hash():
                diffs = spec_diff(old.identity(), spec.identity())
                raise SpecMismatchError(
                    f"{self.path} holds a run with a different spec; refusing to resume it.\n  "
                    + "\n  ".join(diffs)
                    + "\nUse another --out, or delete the directory to start over."
                )
            stored["spec"] = spec.to_dict()  # metric settings may change between invocations
            stored.setdefault("resumed_at", []).append(now())
            stored["status"] = "running"
            write_manifest_file(self.manifest_path, stored)
            return True
        self._write_new_manifest(spec, extra)
        return False

    def _write_new_manifest(
        self, spec: EvalSpec, extra: dict[str, Any] | None, checksummed: bool = True, **more: Any
    ) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        manifest = {
            "polytox_run": MANIFEST_FORMAT,
            "spec": spec.to_dict(),
            "spec_hash": spec.spec_hash(),
            "seed": spec.seed,
            "created_at": now(),
            "status": "running",
            "versions": package_versions(),
            "git_commit": git_commit(),
            "platform": platform_info(),
            **({"checksums": CHECKSUM} if checksummed else {}),
            **(extra or {}),
            **more,
        }
        write_manifest_file(self.manifest_path, manifest)

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest()
        data.update(fields)
        write_manifest_file(self.manifest_path, data)

    def write_prompts(self, prompts: Sequence[Prompt]) -> list[str]:
        """Record the selected prompts once; a resumed run must select exactly the same ids. Returns one line
        per repair: a damaged file, or one recorded for another spec, is written again (the prompts derive
        from the spec alone); one whose checksum is missing gets it back when its rows equal the prompts
        derived again (else it is written again)."""
        ids = [p.id for p in prompts]
        table = self._prompt_table(prompts)
        path, name = self.prompts_path, self.prompts_path.name
        why = part_problem(path, key=("spec_hash", self.spec_hash) if self.spec_hash else None) if path.exists() else ""
        if why is None:
            stored = read_parquet(path, columns=["prompt_id"]).column(0).to_pylist()
            if stored != ids:
                raise SpecMismatchError(
                    f"{self.path}: the prompt source now yields different prompts than when the run started "
                    f"({len(stored)} stored, {len(ids)} now); refusing to mix them."
                )
            if checksum.recorded(path) is not None or not self.manifest_checksummed():
                return []
            if read_parquet(path).equals(table):
                checksum.record(path)
                return [f"{name} has no checksum: its rows equal the prompts derived again; checksum restored"]
            why = "has no checksum and differs from the prompts derived again"
        # a damaged prompts.parquet is rewritten: the prompts derive from the spec alone
        write_parquet(path, table, self._meta("spec", "spec_hash"))
        return [f"{name} {why}: written again"] if why else []

    def manifest_checksummed(self) -> bool:
        """Whether the manifest says every file of the run has its checksum."""
        try:
            return self.manifest().get("checksums") == CHECKSUM
        except PolytoxError:
            return False

    def _prompt_table(self, prompts: Sequence[Prompt]) -> pa.Table:
        """The selected prompts as ``prompts.parquet`` stores them."""
        ids = [p.id for p in prompts]
        return pa.Table.from_pydict(
            {
                "prompt_id": ids,
                "position": list(range(len(prompts))),
                "text": [p.text for p in prompts],
                "lang": [p.lang for p in prompts],
                "toxicity": [p.toxicity for p in prompts],
                "bucket": [p.bucket for p in prompts],
                "source": [p.source for p in prompts],
                "meta_json": [json.dumps(dict(p.meta), ensure_ascii=False, default=str) for p in prompts],
            },
            schema=PROMPT_SCHEMA,
        )

    def write_generations(self, shard: int, generations: Sequence[Generation]) -> None:
        table = pa.Table.from_pydict(
            {
                "prompt_id": [g.prompt_id for g in generations],
                "sample_index": [g.sample_index for g in generations],
                "text": [g.text for g in generations],
                "finish_reason": [g.finish_reason for g in generations],
                "n_tokens": [g.n_tokens for g in generations],
                "prompt_truncated": [g.prompt_truncated for g in generations],
                "error": [g.error for g in generations],
            },
            schema=GENERATION_SCHEMA,
        )
        write_parquet(self.generation_part(shard), table, self._meta("generation_key"))

    def write_scores(
        self,
        scorer_id: str,
        shard: int,
        generations: Sequence[Generation],
        scores: Sequence[Score],
        attributes: Sequence[str],
    ) -> None:
        columns: dict[str, list[Any]] = {
            "prompt_id": [g.prompt_id for g in generations],
            "sample_index": [g.sample_index for g in generations],
        }
        for attr in attributes:
            columns[attr] = [s.get(attr) for s in scores]
        # the raw (uncalibrated) value beside its attribute where the scorer keeps one (scoring/raw.py): a
        # named scale can then be read from the stored run without scoring again; null where a score has none
        raws = [raw_name(a) for a in attributes if any(s.get(raw_name(a)) is not None for s in scores)]
        for name in raws:
            columns[name] = [s.get(name) for s in scores]
        columns["error"] = [s.error for s in scores]
        schema = pa.schema(
            [
                ("prompt_id", pa.string()),
                ("sample_index", pa.int32()),
                *[(a, pa.float64()) for a in [*attributes, *raws]],
                ("error", pa.string()),
            ]
        )
        write_parquet(
            self.score_part(scorer_id, shard), pa.Table.from_pydict(columns, schema=schema), self._meta("spec_hash")
        )

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        """Write ``metrics.json`` atomically, with its checksum beside it (``.metrics.json.sha256``)."""
        text = json.dumps(metrics, indent=2, default=str) + "\n"

        def write(tmp: str) -> None:
            Path(tmp).write_text(text, encoding="utf-8")

        checksum.commit(self.metrics_path, write)

    def remove_leftovers(self) -> list[str]:
        """``repair.remove_leftovers``: the temporary files a killed writer left, removed."""
        return repair.remove_leftovers(self)

    def remove_damaged(self, sizes: Sequence[tuple[int, set[str]]], scorer_id: str) -> list[str]:
        """``repair.remove_damaged``: every damaged part removed, so its shard is made again."""
        return repair.remove_damaged(self, sizes, scorer_id)
