"""``RunReader``: a run directory opened to read. Its manifest and spec, the stored prompts, generations,
scores and ``metrics.json``, each checked for damage first (``check_readable``; damage is one line naming
the file and the repair command). It has no method that writes, locks or repairs, and opening it creates
nothing: the readers (``api.Run``, metrics, analysis, leaderboard, report) hold this type, the runner holds
``writer.RunStore``. What readers do keep lies outside the run's own files: numbers derived from a run
(``RUN/derived/``, ``_util.derived``) and the verified-files memo (the cache folder, ``_util.verified``)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DamagedRunError, PolytoxError
from ..spec import EvalSpec
from ..types import Generation
from .damage import RunChecks
from .files import MANIFEST_DIGEST, generation_key, read_json_file, read_parquet, repair_command, spec_diff
from .manifest import manifest_problem, manifest_spec
from .migrate import migrate_manifest
from .verify import verify


class RunReader(RunChecks):
    """A run directory, read only; see ``polytox.store`` for its layout."""

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

    def read_score_errors(self, scorer_id: str, shard: int) -> dict[tuple[str, int], str | None]:
        """The stored score error (None when scored) of each (prompt id, sample index) of a shard."""
        table = read_parquet(self.score_part(scorer_id, shard), columns=["prompt_id", "sample_index", "error"])
        return {(p, k): e for p, k, e in zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)}

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

    def verify(self) -> tuple[list[str], list[str]]:
        """``eval --verify``: the whole run checked, every part hashed, (notes, problems) (``verify.verify``)."""
        return verify(self)
