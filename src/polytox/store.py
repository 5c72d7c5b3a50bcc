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

Damage (a disk that filled up, a copy cut short, a file edited by hand, one flipped byte) is found, not
trusted. Every Parquet file of a run has its SHA-256 in ``.NAME.sha256`` beside it (``_util.checksum``),
written before the file is renamed into place, and the manifest says ``checksums: sha256``; a part whose
bytes do not match is damaged, even when it still decodes. A run made before checksums were kept falls
back to the checks below, and says so once. Besides, each part records in its Parquet metadata the hash
it was made for (generation parts: ``generation_key``, the spec without its scorer and prompt source,
which ``eval --generations-from`` may change; score parts: the spec hash), and ``prompts.parquet`` records
the whole spec and its hash. That recorded spec is the reference: the manifest carries its own checksum
(``manifest_sha256``) and must agree with it, and ``metrics.json`` has a checksum beside it like a part.
On resume ``remove_damaged`` checks every stored part (its checksum, or without one that it opens; that
it holds the shard's prompts times K rows and was made for this spec; that a score part has its
generation part; that no part lies past the last shard); a damaged part is removed so the shard is made
again (generation: the same seeds, so the same text; a damaged generation part takes its score part with
it). An unreadable, edited or missing ``manifest.json``, or one without a spec, is rebuilt from the spec
recorded in ``prompts.parquet`` when that is the requested spec (the parts are then checked as on any
resume; the repair never regenerates from the damaged manifest's spec), and is one clear error when
nothing records the spec. A resume also removes temporary files a killed writer left (``--verify`` lists
them).
Only writers repair, under the run's lock (``_util.runlock``); every reader calls ``check_readable`` first,
which reports the first damaged file in one line with the repair command (``polytox eval --out RUN``); it
does not read again a part remembered unchanged since it passed them (``_util.verified``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ._util import checksum, runlock
from ._util.atomic import TMP_PREFIX, atomic_write_json
from ._util.verified import VerifiedFiles, stat_of
from .errors import DamagedRunError, PolytoxError, SpecMismatchError
from .spec import EvalSpec
from .types import Generation, Prompt, Score, raw_name

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

VERSIONED_PACKAGES = (
    "polytox",
    "torch",
    "transformers",
    "numpy",
    "pyarrow",
    "duckdb",
    "alt-profanity-check",
    "scikit-learn",
    "scipy",
    "vllm",
    "tokenizers",
)

MANIFEST_FORMAT = 2  # the manifest's ``polytox_run``; earlier layouts are read through ``migrate_manifest``
MANIFEST_DIGEST = "manifest_sha256"  # the manifest's own checksum (format 2 on), over every other field
CHECKSUM = "sha256"  # the manifest's ``checksums``: each part has a ``NAME.sha256`` beside it (_util.checksum)


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


def write_manifest_file(path: Path, data: dict[str, Any]) -> None:
    """Write a manifest atomically, in the current format, with its checksum in ``MANIFEST_DIGEST``: the
    digest is taken over the JSON as it will be read back, so any later edit of any field is found."""
    plain = json.loads(json.dumps({k: v for k, v in data.items() if k != MANIFEST_DIGEST}, default=str))
    plain["polytox_run"] = MANIFEST_FORMAT
    plain[MANIFEST_DIGEST] = checksum.json_digest(plain)
    atomic_write_json(path, plain)


def manifest_problem(data: dict[str, Any]) -> str | None:
    """Why a parsed manifest cannot be trusted as written (None: its checksum matches, or it predates them)."""
    digest = data.get(MANIFEST_DIGEST)
    if digest is None:
        fmt = data.get("polytox_run", 1)
        return f"has no checksum ({MANIFEST_DIGEST} is missing)" if not isinstance(fmt, int) or fmt >= 2 else None
    if checksum.json_digest({k: v for k, v in data.items() if k != MANIFEST_DIGEST}) != digest:
        return "does not match its checksum (it was edited after it was written)"
    return None


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


def repair_command(out: Path | str) -> str:
    """The command that repairs a damaged run: the resume, with the spec the run recorded."""
    return f"polytox eval --out {shlex.quote(str(out))}"


def migrate_manifest(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest as read from disk, in the shape every reader expects, whatever polytox version wrote it.

    The one place that knows the run store's earlier formats, so readers never branch on them:

    - ``checksums`` absent: a run made before part checksums were kept; it becomes ``None``, and such a run's
      parts are checked by their structure (``RunStore.checksummed``, ``part_problem``);
    - ``scorer`` absent: a run whose scorer was never described (stopped before it, or written by another
      tool); it becomes ``{}``, so ``manifest["scorer"].get("id")`` is None there;
    - ``seed`` absent: the spec's seed, the one the run drew with;
    - ``polytox_run`` absent: format 1;
    - ``manifest_sha256`` absent (format 1): a manifest written before it carried its own checksum; it is
      checked against the spec ``prompts.parquet`` recorded instead (``RunStore.spec_disagreement``), and
      gets its checksum on the next write.

    Parts written before each part recorded the hash it was made for carry none and are accepted by
    ``part_problem``. The spec is never touched, so the spec hash (and whether a rerun resumes) does not
    change; a writer stores the migrated manifest on its next update."""
    out = dict(data)
    out.setdefault("polytox_run", 1)
    out.setdefault("checksums", None)
    out.setdefault("scorer", {})
    spec = out.get("spec")
    if "seed" not in out and isinstance(spec, dict):
        out["seed"] = spec.get("seed", 0)
    return out


def manifest_spec(path: Path, data: dict[str, Any]) -> EvalSpec:
    """The spec of a parsed manifest; a manifest that parses but lacks it (``{}``), or holds one that does not
    load, raises ``DamagedRunError`` naming the file, as an unparsable one does."""
    spec = data.get("spec")
    if not isinstance(spec, dict):
        raise DamagedRunError(f"{path} is damaged (no 'spec' object)", path)
    # the fields readers use beside the spec, when present, must have their type
    for name, kind in (("scorer", dict), ("status", str), ("seed", int)):
        if name in data and not isinstance(data[name], kind):
            raise DamagedRunError(f"{path} is damaged ({name!r} is not a {kind.__name__})", path)
    try:
        loaded = EvalSpec.from_dict(spec)
    except Exception as exc:  # a spec edited by hand or cut: whatever from_dict raises, it is damage
        why = " ".join(str(exc).split())[:160]
        raise DamagedRunError(f"{path} is damaged (its spec does not load: {why})", path) from exc
    if "seed" in data and data["seed"] != loaded.seed:
        raise DamagedRunError(f"{path} is damaged (its seed {data['seed']} is not its spec's {loaded.seed})", path)
    return loaded


def shard_index(part: Path) -> int | None:
    """The shard number of ``part-NNNNN.parquet`` (None: not a part name)."""
    match = re.fullmatch(r"part-(\d+)\.parquet", part.name)
    return int(match.group(1)) if match else None


def remove_part(part: Path) -> None:
    """Remove a part and its checksum file."""
    part.unlink(missing_ok=True)
    checksum.sidecar(part).unlink(missing_ok=True)


class RunStore:
    """A run directory; see the module docstring for its layout."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        # what the parts record (set by ``open``): a store opened only to read writes no hashes
        self.spec_hash: str | None = None
        self.generation_key: str | None = None
        self.spec_record: str | None = None
        self.verified = VerifiedFiles()  # parts verified unchanged since: a reader does not hash them again

    def _meta(self, *names: str) -> dict[str, str]:
        values = {"spec": self.spec_record, "spec_hash": self.spec_hash, "generation_key": self.generation_key}
        return {name: value for name in names if (value := values[name]) is not None}

    # ---- manifest -------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def stored_anything(self) -> bool:
        """Whether the folder holds a run's prompts or parts (with or without its manifest)."""
        parts = [*self.path.glob("generations/part-*.parquet"), *self.path.glob("scores/*/part-*.parquet")]
        return self.prompts_path.exists() or bool(parts)

    def manifest(self) -> dict[str, Any]:
        """The manifest; a missing one says this is not a run (or, beside stored prompts or parts, that the
        manifest is lost), a damaged one names the file and the repair. Damage is: unparsable, no spec, a
        checksum that does not match (any field edited by hand), or a spec that disagrees with the one
        ``prompts.parquet`` recorded (``spec_disagreement``)."""
        if not self.exists():
            if self.stored_anything():
                raise DamagedRunError(
                    f"{self.manifest_path} is missing; repair it with: {repair_command(self.path)}",
                    self.manifest_path,
                )
            raise PolytoxError(f"{self.path} is not a polytox run directory (no manifest.json)")
        try:
            data = read_json_file(self.manifest_path)
            spec = manifest_spec(self.manifest_path, data)
            why = manifest_problem(data) or self.spec_disagreement(data, spec)
            if why is not None:
                raise DamagedRunError(f"{self.manifest_path} {why}", self.manifest_path)
        except DamagedRunError as exc:
            raise DamagedRunError(
                f"{exc}; repair it with: {repair_command(self.path)}",
                self.manifest_path,
            ) from exc
        return migrate_manifest(data)

    def spec(self) -> EvalSpec:
        """The stored spec: the manifest's, or, when the manifest is damaged, the one ``prompts.parquet``
        recorded (so ``--retry-failed`` can rebuild a damaged manifest)."""
        try:
            return EvalSpec.from_dict(self.manifest()["spec"])
        except DamagedRunError:
            recorded = self.recorded_spec()
            if recorded is None:
                raise
            return EvalSpec.from_dict(recorded)

    def spec_disagreement(self, data: dict[str, Any], spec: EvalSpec) -> str | None:
        """Why the manifest's spec is not the run's, or None. The spec ``prompts.parquet`` recorded at the
        start is the reference: a manifest whose own checksum matches is trusted over it (a prompts file
        from another run is then the damage, which ``check_readable`` names); a manifest from before
        checksums must agree with it, unless the run's generation parts were made for the manifest's spec
        and not for the recorded one."""
        if data.get(MANIFEST_DIGEST) is not None:
            return None
        recorded = self.recorded_spec()
        if recorded is None:
            return None
        try:
            reference = EvalSpec.from_dict(recorded)
        except Exception:  # a recorded spec that no longer loads: prompts.parquet's check reports it
            return None
        if reference.spec_hash() == spec.spec_hash():
            return None
        try:
            meta = pq.read_schema(self.generation_part(0)).metadata or {}
            made_for = meta.get(b"polytox.generation_key", b"").decode()
        except Exception:  # no part yet, or a torn one: nothing speaks for the manifest
            made_for = ""
        if made_for == generation_key(spec) != generation_key(reference):
            return None
        diff = "; ".join(spec_diff(reference.identity(), spec.identity())).replace("requested", "manifest")
        return f"disagrees with the spec prompts.parquet recorded ({diff.replace('stored', 'recorded')})"

    def recorded_spec(self) -> dict[str, Any] | None:
        """The spec ``prompts.parquet`` recorded when the run started (None: absent, unreadable or older)."""
        try:
            meta = pq.read_schema(self.prompts_path).metadata or {}
            data = json.loads(meta[b"polytox.spec"])
        except (OSError, KeyError, ValueError, pa.ArrowException):
            return None
        return data if isinstance(data, dict) else None

    def _rebuild_or_refuse(self, spec: EvalSpec, damage: DamagedRunError) -> bool:
        """A damaged manifest at ``open``: True when ``prompts.parquet`` recorded ``spec`` (the manifest can be
        rebuilt; the parts are checked next, as on any resume), False when nothing is stored yet (start
        afresh); a recorded other spec, or parts with no recorded spec, are refused in one line."""
        recorded = self.recorded_spec()
        if recorded is not None:
            old = EvalSpec.from_dict(recorded)
            if old.spec_hash() != spec.spec_hash():
                raise SpecMismatchError(
                    f"{self.path} holds a run with a different spec (its manifest.json is damaged; the spec "
                    "comes from prompts.parquet); refusing to resume it.\n  "
                    + "\n  ".join(spec_diff(old.identity(), spec.identity()))
                    + "\nUse another --out, or delete the directory to start over."
                )
            return True
        parts = sorted(self.path.glob("generations/part-*.parquet")) + sorted(self.path.glob("scores/*/part-*"))
        if not parts and not self.prompts_path.exists():
            return False
        raise DamagedRunError(
            f"{damage}, and the run's parts do not record the spec they were made for; "
            f"delete {self.path} to start over",
            self.manifest_path,
        )

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
                rebuilt = self._rebuild_or_refuse(spec, exc)
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

    # ---- prompts --------------------------------------------------------------------------------
    @property
    def prompts_path(self) -> Path:
        return self.path / "prompts.parquet"

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

    # ---- generations ----------------------------------------------------------------------------
    def generation_part(self, shard: int) -> Path:
        return self.path / "generations" / f"part-{shard:05d}.parquet"

    def has_generations(self, shard: int) -> bool:
        return self.generation_part(shard).exists()

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

    def read_generations(self, shard: int) -> list[Generation]:
        rows = read_parquet(self.generation_part(shard)).to_pylist()
        return [
            Generation(
                prompt_id=r["prompt_id"],
                sample_index=r["sample_index"],
                text=r["text"],
                finish_reason=r["finish_reason"],
                n_tokens=r["n_tokens"],
                prompt_truncated=r["prompt_truncated"],
                error=r["error"],
            )
            for r in rows
        ]

    # ---- scores ---------------------------------------------------------------------------------
    def scores_dir(self, scorer_id: str) -> Path:
        return self.path / "scores" / slug(scorer_id)

    def score_part(self, scorer_id: str, shard: int) -> Path:
        return self.scores_dir(scorer_id) / f"part-{shard:05d}.parquet"

    def has_scores(self, scorer_id: str, shard: int) -> bool:
        return self.score_part(scorer_id, shard).exists()

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

    def read_score_errors(self, scorer_id: str, shard: int) -> dict[tuple[str, int], str | None]:
        """The stored score error (None when scored) of each (prompt id, sample index) of a shard."""
        table = read_parquet(self.score_part(scorer_id, shard), columns=["prompt_id", "sample_index", "error"])
        return {(p, k): e for p, k, e in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)}

    def scorer_ids(self) -> list[str]:
        root = self.path / "scores"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []

    # ---- metrics --------------------------------------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.json"

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        """Write ``metrics.json`` atomically, with its checksum beside it (``.metrics.json.sha256``)."""
        text = json.dumps(metrics, indent=2, default=str) + "\n"

        def write(tmp: str) -> None:
            Path(tmp).write_text(text, encoding="utf-8")

        checksum.commit(self.metrics_path, write)

    def metrics_problem(self, manifest: dict[str, Any]) -> str | None:
        """Why ``metrics.json`` cannot be read as the run's metrics (None: absent, or sound). Its checksum must
        match; a run whose manifest carries its own checksum writes one for ``metrics.json`` too, so a
        missing one is damage there; an older run's file must at least parse."""
        path = self.metrics_path
        if not path.exists():
            return None
        if checksum.recorded(path) is not None:
            return checksum.problem(path)
        if manifest.get(MANIFEST_DIGEST) is not None:
            return f"has no checksum ({checksum.sidecar(path).name} is missing)"
        try:
            read_json_file(path)
        except DamagedRunError as exc:
            return str(exc).removeprefix(f"{path} ")
        return None

    def read_metrics(self) -> dict[str, Any]:
        """The stored ``metrics.json`` ({} before the run's first finish); damage is one line with the repair."""
        if not self.metrics_path.exists():
            return {}
        why = self.metrics_problem(self.manifest())
        if why is not None:
            raise DamagedRunError(
                f"{self.metrics_path} {why}; repair it with: {repair_command(self.path)}", self.metrics_path
            )
        return read_json_file(self.metrics_path)

    def summaries(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The manifest and ``metrics.json`` as written ({} where absent), each checked against its own
        checksum but not the manifest's spec against ``prompts.parquet``: for tables that read only these
        summaries (the detox comparison). Damage is one line naming the file, with the repair."""
        manifest = read_json_file(self.manifest_path) if self.exists() else {}
        problems = [(self.manifest_path, manifest_problem(manifest))]
        if self.metrics_path.exists():
            problems.append((self.metrics_path, self.metrics_problem(manifest)))
        for path, why in problems:
            if why is not None:
                raise DamagedRunError(f"{path} {why}; repair it with: {repair_command(self.path)}", path)
        return manifest, read_json_file(self.metrics_path) if self.metrics_path.exists() else {}

    def leftovers(self) -> list[Path]:
        """Temporary files a killed writer left behind (``.tmp-*`` in the run's folders)."""
        folders = [self.path, self.path / "generations", *self.path.glob("scores/*")]
        return sorted(p for folder in folders for p in folder.glob(f"{TMP_PREFIX}*") if p.is_file())

    def remove_leftovers(self) -> list[str]:
        """Remove what ``leftovers`` finds (a writer holds the run's lock: no temporary file is in use);
        one line per file."""
        lines = []
        for path in self.leftovers():
            path.unlink(missing_ok=True)
            lines.append(f"{path.relative_to(self.path)} is a temporary file left by a stopped writer: removed")
        return lines

    def glob(self, what: str, scorer_id: str | None = None) -> str:
        """A glob DuckDB can read: ``generations`` or ``scores`` (of ``scorer_id``)."""
        if what == "generations":
            return str(self.path / "generations" / "part-*.parquet")
        if scorer_id is None:
            raise ValueError("scores need a scorer id")
        return str(self.scores_dir(scorer_id) / "part-*.parquet")

    # ---- damage ---------------------------------------------------------------------------------
    def checksummed(self) -> bool:
        """Whether the run records a checksum for each part (made since checksums were kept): its manifest
        says so, or ``prompts.parquet`` has one. In an older run a part without one is checked by its
        structure only."""
        try:
            if migrate_manifest(read_json_file(self.manifest_path))["checksums"] == CHECKSUM:
                return True
        except (OSError, DamagedRunError):
            pass
        return checksum.sidecar(self.prompts_path).exists()

    def unchecksummed_note(self) -> str | None:
        """One line when stored parts carry no checksum (a run made before checksums were kept)."""
        parts = [*self.path.glob("generations/part-*.parquet"), *self.path.glob("scores/*/part-*.parquet")]
        bare = [p for p in parts if not checksum.sidecar(p).exists()]
        if not bare:
            return None
        return (
            f"note: {self.path} was made before part checksums were kept: {len(bare)} part(s) without one are "
            "checked by their structure only (a changed byte that still decodes cannot be found there)"
        )

    def part_problems(
        self,
        sizes: Sequence[tuple[int, set[str]]],
        scorer_ids: Sequence[str],
        own_scorer: str | None = None,
        full: bool = True,
        trust: bool = False,
    ) -> list[tuple[int, Path, str]]:
        """(shard, part, why) for every stored part that cannot be trusted: ``sizes`` gives each shard's
        expected row count and prompt ids; the parts of ``scorer_ids`` are checked beside the generations
        (the spec hash only for ``own_scorer``'s, the scorer the spec names; hashes are checked once
        ``open`` or ``verify`` has set them). A score part without its generation part, and a part past the
        run's last shard, are damage too: neither is read as data."""
        checksummed = self.checksummed()
        scorers = [slug(s) for s in scorer_ids]
        own = slug(own_scorer) if own_scorer else None
        found = []
        for shard, (rows, ids) in enumerate(sizes):
            generations = self.generation_part(shard)
            parts = [(generations, ("generation_key", self.generation_key))]
            parts += [(self.score_part(s, shard), ("spec_hash", self.spec_hash if s == own else None)) for s in scorers]
            for part, (name, value) in parts:
                if part.exists():
                    key = (name, value) if value else None
                    why = part_problem(part, rows, ids, key, full, checksummed, self.verified, trust)
                    if why is not None:
                        found.append((shard, part, why))
            if not generations.exists():
                found += [
                    (shard, part, f"is stored without its generation part ({generations.name} is missing)")
                    for part in (self.score_part(s, shard) for s in scorers)
                    if part.exists()
                ]
        stored = sorted(self.path.glob("generations/part-*.parquet"))
        for s in scorers:
            stored += sorted(self.scores_dir(s).glob("part-*.parquet"))
        for part in stored:
            index = shard_index(part)
            if index is None or index >= len(sizes):
                found.append((-1, part, f"is not a shard of this run (it has {len(sizes)} shard(s))"))
        return found

    def remove_damaged(self, sizes: Sequence[tuple[int, set[str]]], scorer_id: str) -> list[str]:
        """Remove every damaged part (a generation part takes its shard's score parts with it), so the
        executor makes those shards again; returns one line per part removed."""
        lines = []
        for shard, part, why in self.part_problems(sizes, [scorer_id], scorer_id):
            if not part.exists():
                continue
            remove_part(part)
            lines.append(f"{part.relative_to(self.path)} {why}: removed, made again")
            if part == self.generation_part(shard):
                for scores in (self.path / "scores").glob(f"*/part-{shard:05d}.parquet"):
                    remove_part(scores)
        return lines

    def check_readable(self, scorer_id: str | None = None) -> dict[str, Any]:
        """The damage check every reader runs before reading (``metrics``, ``leaderboard``, ``report``,
        ``analyze``, ``open_run``); returns the manifest. The manifest must hold a spec, ``prompts.parquet``
        and every part must match its checksum (or open, in a run made before checksums were kept) and hold
        its shard's prompts times K rows; a score part is read only beside its generation part. The first
        damaged file raises ``DamagedRunError``: one line naming it and the repair command."""
        manifest = self.manifest()
        spec = manifest_spec(self.manifest_path, manifest)
        self.spec_hash, self.generation_key = spec.spec_hash(), generation_key(spec)
        own = manifest["scorer"].get("id")
        scorers = [scorer_id] if scorer_id is not None else self.scorer_ids()
        problems = self.file_problems(manifest, trust=True)
        sizes = self.stored_plan(spec) if not any(p == self.prompts_path for p, _ in problems) else None
        if sizes is not None:
            problems += [(part, why) for _, part, why in self.part_problems(sizes, scorers, own, trust=True)]
        if problems:
            part, why = problems[0]
            more = f" (and {len(problems) - 1} more damaged file(s))" if len(problems) > 1 else ""
            raise DamagedRunError(f"{part} {why}{more}; repair it with: {repair_command(self.path)}", part)
        return manifest

    def file_problems(self, manifest: dict[str, Any], trust: bool = False) -> list[tuple[Path, str]]:
        """(file, why) for ``prompts.parquet`` and ``metrics.json``: the prompts must match their checksum and
        have been recorded for the manifest's spec (a prompts file swapped in from another run is found by
        its spec hash, checksum and all); ``metrics.json`` as ``metrics_problem`` says."""
        problems: list[tuple[Path, str]] = []
        if self.prompts_path.exists():
            key = ("spec_hash", self.spec_hash) if self.spec_hash else None
            why = part_problem(
                self.prompts_path, key=key, checksummed=self.checksummed(), verified=self.verified, trust=trust
            )
            if why is not None:
                problems.append((self.prompts_path, why))
        elif self.scorer_ids() or any(self.path.glob("generations/part-*.parquet")):
            problems.append((self.prompts_path, "is missing"))
        why = self.metrics_problem(manifest)
        if why is not None:
            problems.append((self.metrics_path, why))
        return problems

    def stored_plan(self, spec: EvalSpec) -> list[tuple[int, set[str]]] | None:
        """The shard sizes of the stored run, from ``prompts.parquet`` and ``spec`` (None: it does not open)."""
        try:
            ids = read_parquet(self.prompts_path, columns=["prompt_id"]).column(0).to_pylist()
        except Exception:  # absent or torn: the caller reports it
            return None
        size, k = spec.shard_size, spec.generation.samples
        return [(len(ids[i : i + size]) * k, set(ids[i : i + size])) for i in range(0, len(ids), size)]

    def verify(self) -> tuple[list[str], list[str]]:
        """Check a whole run: (notes, problems). Problems are damage a resume repairs; notes say what is
        stored and what is still missing (an unfinished run is not a damaged one)."""
        problems: list[str] = []
        notes: list[str] = []
        try:
            manifest = self.manifest()
            spec = manifest_spec(self.manifest_path, manifest)
        except DamagedRunError as exc:
            problems.append(str(exc).split("; repair it")[0])
            recorded = self.recorded_spec()
            if recorded is None:
                return notes, problems
            spec, manifest = EvalSpec.from_dict(recorded), migrate_manifest({"spec": recorded})
        self.spec_hash, self.generation_key = spec.spec_hash(), generation_key(spec)
        if runlock.held(self.path):
            notes.append(f"{self.path}: a writer is running: its temporary files are not counted")
        else:
            problems += [f"{path} is a temporary file left by a stopped writer" for path in self.leftovers()]
        found = self.file_problems(manifest)
        if not self.prompts_path.exists() and not found:
            found.append((self.prompts_path, "is missing"))
        problems += [f"{path} {why}" for path, why in found]
        sizes = self.stored_plan(spec) if not any(p == self.prompts_path for p, _ in found) else None
        if sizes is None:
            if not any(p == self.prompts_path for p, _ in found):
                problems.append(f"{self.prompts_path} does not open")
            return notes, problems
        ids = self.scorer_ids()
        scorer = manifest["scorer"].get("id") or (ids[0] if ids else spec.scorer.name)
        for _, part, why in self.part_problems(sizes, sorted({*ids, slug(scorer)}), scorer):
            problems.append(f"{part} {why}")
        note = self.unchecksummed_note()
        if note is not None:
            notes.append(note)
        scored = sum(self.has_scores(scorer, i) for i in range(len(sizes)))
        notes.append(
            f"{self.path}: {len(sizes)} shard(s), {scored} scored by {scorer}, status "
            f"{manifest.get('status', 'unknown')}"
        )
        if scored < len(sizes):
            notes.append(f"{len(sizes) - scored} shard(s) not scored yet: the run is incomplete")
        return notes, problems
