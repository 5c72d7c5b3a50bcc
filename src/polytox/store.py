"""The run directory: everything a run produced, written as it goes, atomically, resumable.

Layout::

    RUN/
      manifest.json                 spec, spec hash, package versions, seed, git commit, timestamps
      prompts.parquet               the selected prompts (id, text, lang, toxicity, bucket, source, meta)
      generations/part-00000.parquet  one part per shard of prompts (prompt_id, sample_index, text, ...)
      scores/<scorer>/part-00000.parquet  one part per shard (prompt_id, sample_index, toxicity, ...,
                                    toxicity_raw where the scorer keeps raw values, error)
      metrics.json

A part exists only once complete (temporary file + rename), so "which shards are done" is "which parts
exist", and a rerun after a crash redoes only the missing shards. All aggregates run in DuckDB over
the parts.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._util.atomic import atomic_write, atomic_write_json
from .errors import PolytoxError, SpecMismatchError
from .spec import EvalSpec
from .types import Generation, Prompt, Score, raw_name

GENERATION_SCHEMA = pa.schema([
    ("prompt_id", pa.string()), ("sample_index", pa.int32()), ("text", pa.string()),
    ("finish_reason", pa.string()), ("n_tokens", pa.int32()), ("prompt_truncated", pa.bool_()),
    ("error", pa.string()),
])

PROMPT_SCHEMA = pa.schema([
    ("prompt_id", pa.string()), ("position", pa.int64()), ("text", pa.string()), ("lang", pa.string()),
    ("toxicity", pa.float64()), ("bucket", pa.int8()), ("source", pa.string()), ("meta_json", pa.string()),
])

VERSIONED_PACKAGES = ("polytox", "torch", "transformers", "numpy", "pyarrow", "duckdb", "alt-profanity-check",
                      "scikit-learn", "scipy", "vllm", "tokenizers")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    out["python"] = sys.version.split()[0]
    return out


def platform_info() -> dict[str, Any]:
    """The machine a run or a retrain ran on: the last bits of floating-point results can depend on the CPU
    (its SIMD kernels) as well as on the package versions, so both are recorded beside the numbers."""
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"machine": platform.machine(), "system": platform.system(), "cpu": cpu, "cpu_count": os.cpu_count()}


def git_commit() -> str | None:
    """The polytox source checkout's commit, when polytox runs from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


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


def write_parquet(path: Path, table: pa.Table) -> None:
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


class RunStore:
    """A run directory; see the module docstring for its layout."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    # ---- manifest -------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def manifest(self) -> dict[str, Any]:
        if not self.exists():
            raise PolytoxError(f"{self.path} is not a polytox run directory (no manifest.json)")
        with open(self.manifest_path, encoding="utf-8") as fh:
            data: dict[str, Any] = json.load(fh)
        return data

    def spec(self) -> EvalSpec:
        return EvalSpec.from_dict(self.manifest()["spec"])

    def open(self, spec: EvalSpec, extra: dict[str, Any] | None = None) -> bool:
        """Create the run, or check that an existing one has the same spec. Returns True when resuming."""
        if self.exists():
            stored = self.manifest()
            old = EvalSpec.from_dict(stored["spec"])
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
            atomic_write_json(self.manifest_path, stored)
            return True
        self.path.mkdir(parents=True, exist_ok=True)
        manifest = {
            "polytox_run": 1,
            "spec": spec.to_dict(),
            "spec_hash": spec.spec_hash(),
            "seed": spec.seed,
            "created_at": now(),
            "status": "running",
            "versions": package_versions(),
            "git_commit": git_commit(),
            "platform": platform_info(),
            **(extra or {}),
        }
        atomic_write_json(self.manifest_path, manifest)
        return False

    def update_manifest(self, **fields: Any) -> None:
        data = self.manifest()
        data.update(fields)
        atomic_write_json(self.manifest_path, data)

    # ---- prompts --------------------------------------------------------------------------------
    @property
    def prompts_path(self) -> Path:
        return self.path / "prompts.parquet"

    def write_prompts(self, prompts: Sequence[Prompt]) -> None:
        """Record the selected prompts once; a resumed run must select exactly the same ids."""
        ids = [p.id for p in prompts]
        if self.prompts_path.exists():
            stored = pq.read_table(self.prompts_path, columns=["prompt_id"]).column(0).to_pylist()
            if stored != ids:
                raise SpecMismatchError(
                    f"{self.path}: the prompt source now yields different prompts than when the run started "
                    f"({len(stored)} stored, {len(ids)} now); refusing to mix them."
                )
            return
        table = pa.Table.from_pydict({
            "prompt_id": ids,
            "position": list(range(len(prompts))),
            "text": [p.text for p in prompts],
            "lang": [p.lang for p in prompts],
            "toxicity": [p.toxicity for p in prompts],
            "bucket": [p.bucket for p in prompts],
            "source": [p.source for p in prompts],
            "meta_json": [json.dumps(dict(p.meta), ensure_ascii=False, default=str) for p in prompts],
        }, schema=PROMPT_SCHEMA)
        write_parquet(self.prompts_path, table)

    # ---- generations ----------------------------------------------------------------------------
    def generation_part(self, shard: int) -> Path:
        return self.path / "generations" / f"part-{shard:05d}.parquet"

    def has_generations(self, shard: int) -> bool:
        return self.generation_part(shard).exists()

    def write_generations(self, shard: int, generations: Sequence[Generation]) -> None:
        table = pa.Table.from_pydict({
            "prompt_id": [g.prompt_id for g in generations],
            "sample_index": [g.sample_index for g in generations],
            "text": [g.text for g in generations],
            "finish_reason": [g.finish_reason for g in generations],
            "n_tokens": [g.n_tokens for g in generations],
            "prompt_truncated": [g.prompt_truncated for g in generations],
            "error": [g.error for g in generations],
        }, schema=GENERATION_SCHEMA)
        write_parquet(self.generation_part(shard), table)

    def read_generations(self, shard: int) -> list[Generation]:
        rows = pq.read_table(self.generation_part(shard)).to_pylist()
        return [Generation(prompt_id=r["prompt_id"], sample_index=r["sample_index"], text=r["text"],
                           finish_reason=r["finish_reason"], n_tokens=r["n_tokens"],
                           prompt_truncated=r["prompt_truncated"], error=r["error"]) for r in rows]

    # ---- scores ---------------------------------------------------------------------------------
    def scores_dir(self, scorer_id: str) -> Path:
        return self.path / "scores" / slug(scorer_id)

    def score_part(self, scorer_id: str, shard: int) -> Path:
        return self.scores_dir(scorer_id) / f"part-{shard:05d}.parquet"

    def has_scores(self, scorer_id: str, shard: int) -> bool:
        return self.score_part(scorer_id, shard).exists()

    def write_scores(self, scorer_id: str, shard: int, generations: Sequence[Generation],
                     scores: Sequence[Score], attributes: Sequence[str]) -> None:
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
        schema = pa.schema([("prompt_id", pa.string()), ("sample_index", pa.int32()),
                            *[(a, pa.float64()) for a in [*attributes, *raws]], ("error", pa.string())])
        write_parquet(self.score_part(scorer_id, shard), pa.Table.from_pydict(columns, schema=schema))

    def read_score_errors(self, scorer_id: str, shard: int) -> dict[tuple[str, int], str | None]:
        """The stored score error (None when scored) of each (prompt id, sample index) of a shard."""
        table = pq.read_table(self.score_part(scorer_id, shard), columns=["prompt_id", "sample_index", "error"])
        return {(p, k): e for p, k, e in zip(*(table.column(c).to_pylist() for c in table.column_names),
                                              strict=True)}

    def scorer_ids(self) -> list[str]:
        root = self.path / "scores"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []

    # ---- metrics --------------------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.json"

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, metrics)

    def glob(self, what: str, scorer_id: str | None = None) -> str:
        """A glob DuckDB can read: ``generations`` or ``scores`` (of ``scorer_id``)."""
        if what == "generations":
            return str(self.path / "generations" / "part-*.parquet")
        if scorer_id is None:
            raise ValueError("scores need a scorer id")
        return str(self.scores_dir(scorer_id) / "part-*.parquet")
