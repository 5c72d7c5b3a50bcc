"""``eval --out RUN --verify``: a whole run checked, every part hashed (nothing trusted from the
verified-files memo), and nothing written: what is stored and still missing, and each damaged file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util import runlock
from ..errors import DamagedRunError
from ..spec import EvalSpec
from .files import generation_key, slug
from .manifest import manifest_spec
from .migrate import migrate_manifest

if TYPE_CHECKING:
    from .reader import RunReader


def verify(store: RunReader) -> tuple[list[str], list[str]]:
    """Check a whole run: (notes, problems). Problems are damage a resume repairs; notes say what is
    stored and what is still missing (an unfinished run is not a damaged one)."""
    problems: list[str] = []
    notes: list[str] = []
    try:
        manifest = store.manifest()
        spec = manifest_spec(store.manifest_path, manifest)
    except DamagedRunError as exc:
        problems.append(str(exc).split("; repair it")[0])
        recorded = store.recorded_spec()
        if recorded is None:
            return notes, problems
        spec, manifest = EvalSpec.from_dict(recorded), migrate_manifest({"spec": recorded})
    store.spec_hash, store.generation_key = spec.spec_hash(), generation_key(spec)
    if runlock.held(store.path):
        notes.append(f"{store.path}: a writer is running: its temporary files are not counted")
    else:
        problems += [f"{path} is a temporary file left by a stopped writer" for path in store.leftovers()]
    found = store.file_problems(manifest)
    if not store.prompts_path.exists() and not found:
        found.append((store.prompts_path, "is missing"))
    problems += [f"{path} {why}" for path, why in found]
    sizes = store.stored_plan(spec) if not any(p == store.prompts_path for p, _ in found) else None
    if sizes is None:
        if not any(p == store.prompts_path for p, _ in found):
            problems.append(f"{store.prompts_path} does not open")
        return notes, problems
    ids = store.scorer_ids()
    scorer = manifest["scorer"].get("id") or (ids[0] if ids else spec.scorer.name)
    for _, part, why in store.part_problems(sizes, sorted({*ids, slug(scorer)}), scorer):
        problems.append(f"{part} {why}")
    note = store.unchecksummed_note()
    if note is not None:
        notes.append(note)
    scored = sum(store.has_scores(scorer, i) for i in range(len(sizes)))
    notes.append(
        f"{store.path}: {len(sizes)} shard(s), {scored} scored by {scorer}, status {manifest.get('status', 'unknown')}"
    )
    if scored < len(sizes):
        notes.append(f"{len(sizes) - scored} shard(s) not scored yet: the run is incomplete")
    return notes, problems
