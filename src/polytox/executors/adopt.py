"""``polytox eval --generations-from SRC``: score another run's stored generations instead of generating.

Two workflows need it:

- **generate on one host, score on another**: a GPU host with the weights and no scorer model runs the
  generation; a CPU host with the scorer and no weights scores the same continuations;
- **rescore a run with another scorer**: a Perspective-era run's continuations, scored by the offline
  scorer, give both scales on the very same texts.

The new run must ask for the same generations. Its spec may differ from SRC's in the scorer and in how
the prompts are found (metric and fluency settings are outside the spec hash anyway); the prompts it
selects must be SRC's, in order, id for id and text for text. Generation parts are copied atomically, one
per shard, only where the new run has none, so a rerun resumes; a part whose bytes do not match its
checksum is refused, and the copy gets its own checksum. A shard SRC lacks is generated here as
usual (the model must then be available), and the manifest says how many were copied
(``generations_from``) and how many generated here (``executor.shards_generated``). Failed samples are
copied with their errors and counted as failures.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .._util import checksum
from ..errors import DamagedRunError, PolytoxError, SpecMismatchError
from ..spec import EvalSpec
from ..store import RunStore, now, repair_command, spec_diff
from ..store.reader import RunReader
from ..types import Prompt


def generation_identity(spec: EvalSpec) -> dict[str, Any]:
    """What must be equal for the generations to be the ones asked for: the spec's identity but the scorer
    and the prompt selection. The selection is checked by its result instead (``check_prompts``), since
    the prompt file's path is rarely the same on two hosts."""
    identity = spec.identity()
    identity.pop("scorer")
    identity.pop("prompts")
    return identity


def source_run(path: str | Path) -> RunReader:
    """SRC, read only; a folder without a manifest is one clear error."""
    source = RunReader(path)
    if not source.exists():
        raise PolytoxError(f"--generations-from {path}: not a run directory (no manifest.json)")
    return source


def open_source(path: str | Path, spec: EvalSpec) -> RunReader:
    """SRC, read only, after checking it is a run and made the generations ``spec`` asks for."""
    source = source_run(path)
    theirs = source.spec()
    diffs = spec_diff(generation_identity(theirs), generation_identity(spec))
    if diffs:
        raise SpecMismatchError(
            f"--generations-from {path}: its generations were made with another spec; only the scorer and "
            "the prompt source may differ.\n  "
            + "\n  ".join(d.replace(": stored ", ": source ") for d in diffs)
            + "\nWithout spec flags, eval takes the source's spec (give only --scorer / --scorer-opt)."
        )
    return source


def check_prompts(source: RunReader, prompts: Sequence[Prompt]) -> None:
    """The prompts selected here must be SRC's, in order: its generation parts are keyed by shard."""
    if not source.prompts_path.exists():
        raise PolytoxError(f"--generations-from {source.path}: it has no prompts.parquet (not started?)")
    table = pq.read_table(source.prompts_path, columns=["prompt_id", "text"]).to_pydict()
    ids, texts = table["prompt_id"], table["text"]
    here = [p.id for p in prompts]
    if here != ids:
        known = set(ids)
        new = [i for i in here if i not in known]
        what = (
            f"{len(new)} of {len(here)} prompt(s) here are not in that run, e.g. {new[0]!r}"
            if new
            else f"{len(here)} prompt(s) here, {len(ids)} in that run, in another order or number"
        )
        raise SpecMismatchError(
            f"--generations-from {source.path}: the prompt source yields other prompts "
            f"here than it did for that run ({what})"
        )
    changed = [p.id for p, text in zip(prompts, texts, strict=True) if p.text != text]
    if changed:
        raise SpecMismatchError(
            f"--generations-from {source.path}: {len(changed)} prompt(s) have other text "
            f"here than in that run, e.g. {changed[0]!r}"
        )


def available(source: RunReader, target: RunStore, n_shards: int) -> int:
    """Shards that will have generations without generating here (already in the target, or in SRC)."""
    return sum(target.has_generations(i) or source.has_generations(i) for i in range(n_shards))


def copy_to(src: Path, tmp: str) -> None:
    shutil.copyfile(src, tmp)


def copy_generations(source: RunReader, target: RunStore, n_shards: int) -> int:
    """Copy SRC's generation parts where the target has none (each atomically); returns how many."""
    copied = 0
    for shard in range(n_shards):
        if target.has_generations(shard) or not source.has_generations(shard):
            continue
        part = source.generation_part(shard)
        why = checksum.problem(part)
        if why is not None:
            fix = repair_command(source.path)
            raise DamagedRunError(f"--generations-from: {part} {why}; repair it with: {fix}", part)
        checksum.commit(target.generation_part(shard), partial(copy_to, part))
        copied += 1
    return copied


def record(source: RunReader, target: RunStore, copied: int) -> None:
    """Note in the target's manifest where its generations came from (kept across resumes)."""
    theirs = source.manifest()
    before = target.manifest().get("generations_from") or {}
    target.update_manifest(
        generations_from={
            "path": str(source.path.resolve()),
            "spec_hash": theirs.get("spec_hash"),
            "model": theirs.get("spec", {}).get("generation", {}).get("model"),
            "platform": theirs.get("platform"),
            "versions": theirs.get("versions"),
            "git_commit": theirs.get("git_commit"),
            "shards_copied": int(before.get("shards_copied", 0)) + copied,
            "at": now(),
        }
    )
