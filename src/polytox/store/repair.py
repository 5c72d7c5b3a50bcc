"""What a writer repairs on resume, under the run's lock: it removes damaged parts (made again from the same
seeds) and temporary files a killed writer left, and decides whether a damaged manifest can be rebuilt from
the spec ``prompts.parquet`` recorded. Only ``writer.RunStore`` calls these."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._util import checksum
from ..errors import DamagedRunError, SpecMismatchError
from ..spec import EvalSpec
from .files import spec_diff
from .reader import RunReader


def remove_part(part: Path) -> None:
    """Remove a part and its checksum file."""
    part.unlink(missing_ok=True)
    checksum.sidecar(part).unlink(missing_ok=True)


def remove_leftovers(store: RunReader) -> list[str]:
    """Remove what ``leftovers`` finds (a writer holds the run's lock: no temporary file is in use);
    one line per file."""
    lines = []
    for path in store.leftovers():
        path.unlink(missing_ok=True)
        lines.append(f"{path.relative_to(store.path)} is a temporary file left by a stopped writer: removed")
    return lines


def remove_damaged(store: RunReader, sizes: Sequence[tuple[int, set[str]]], scorer_id: str) -> list[str]:
    """Remove every damaged part (a generation part takes its shard's score parts with it), so the
    executor makes those shards again; returns one line per part removed."""
    lines = []
    for shard, part, why in store.part_problems(sizes, [scorer_id], scorer_id):
        if not part.exists():
            continue
        remove_part(part)
        lines.append(f"{part.relative_to(store.path)} {why}: removed, made again")
        if part == store.generation_part(shard):
            for scores in (store.path / "scores").glob(f"*/part-{shard:05d}.parquet"):
                remove_part(scores)
    return lines


def rebuild_or_refuse(store: RunReader, spec: EvalSpec, damage: DamagedRunError) -> bool:
    """A damaged manifest at ``open``: True when ``prompts.parquet`` recorded ``spec`` (the manifest can be
    rebuilt; the parts are checked next, as on any resume), False when nothing is stored yet (start
    afresh); a recorded other spec, or parts with no recorded spec, are refused in one line."""
    recorded = store.recorded_spec()
    if recorded is not None:
        old = EvalSpec.from_dict(recorded)
        if old.spec_hash() != spec.spec_hash():
            raise SpecMismatchError(
                f"{store.path} holds a run with a different spec (its manifest.json is damaged; the spec "
                "comes from prompts.parquet); refusing to resume it.\n  "
                + "\n  ".join(spec_diff(old.identity(), spec.identity()))
                + "\nUse another --out, or delete the directory to start over."
            )
        return True
    parts = sorted(store.path.glob("generations/part-*.parquet")) + sorted(store.path.glob("scores/*/part-*"))
    if not parts and not store.prompts_path.exists():
        return False
    raise DamagedRunError(
        f"{damage}, and the run's parts do not record the spec they were made for; delete {store.path} to start over",
        store.manifest_path,
    )
