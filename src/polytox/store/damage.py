"""The damage checks of a run's files, shared by the reader's ``check_readable``, ``verify`` and the writer's
resume (``repair.remove_damaged``): which parts, and whether ``prompts.parquet`` and ``metrics.json``, can
be trusted. They read and hash files, and write nothing in the run (a part that passes may be remembered
in the verified-files memo, which lives in the cache folder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._util import checksum
from .._util.verified import VerifiedFiles
from ..errors import DamagedRunError
from ..spec import EvalSpec
from .checks import part_problem
from .files import CHECKSUM, MANIFEST_DIGEST, read_json_file, read_parquet, shard_index, slug
from .layout import RunLayout
from .migrate import migrate_manifest


class RunChecks(RunLayout):
    """A run directory's damage checks (see ``polytox.store`` for what counts as damage)."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(path)
        # what the parts record (set by ``check_readable``, ``verify`` or the writer's ``open``)
        self.spec_hash: str | None = None
        self.generation_key: str | None = None
        self.verified = VerifiedFiles()  # parts verified unchanged since: a reader does not hash them again

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
