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

Two handles: ``RunReader`` (``reader.py``) reads and checks a run and writes nothing in it; ``RunStore``
(``writer.py``) opens, writes and, on resume, repairs one (``repair.py``). Beside them: the file formats
(``files.py``), the paths (``layout.py``), the manifest's checks (``manifest.py``) and earlier layouts
(``migrate.py``), one part's checks (``checks.py``), the run's damage checks (``damage.py``), ``--verify``
(``verify.py``) and what a manifest records of where a run was made (``provenance.py``). Read-only rooms
import ``polytox.store.reader`` (and the modules it uses), never this package's face or the writer
(import-linter contract).
"""

from __future__ import annotations

from .checks import expectation, part_checks, part_problem
from .files import (
    CHECKSUM,
    GENERATION_SCHEMA,
    MANIFEST_DIGEST,
    MANIFEST_FORMAT,
    PROMPT_SCHEMA,
    generation_key,
    read_json_file,
    read_parquet,
    repair_command,
    shard_index,
    slug,
    spec_diff,
    write_parquet,
)
from .manifest import manifest_problem, manifest_spec
from .migrate import migrate_manifest
from .provenance import VERSIONED_PACKAGES, git_commit, now, package_versions, platform_info
from .reader import RunReader
from .repair import remove_part
from .writer import RunStore, write_manifest_file

__all__ = [
    "CHECKSUM",
    "GENERATION_SCHEMA",
    "MANIFEST_DIGEST",
    "MANIFEST_FORMAT",
    "PROMPT_SCHEMA",
    "VERSIONED_PACKAGES",
    "RunReader",
    "RunStore",
    "expectation",
    "generation_key",
    "git_commit",
    "manifest_problem",
    "manifest_spec",
    "migrate_manifest",
    "now",
    "package_versions",
    "part_checks",
    "part_problem",
    "platform_info",
    "read_json_file",
    "read_parquet",
    "remove_part",
    "repair_command",
    "shard_index",
    "slug",
    "spec_diff",
    "write_manifest_file",
    "write_parquet",
]
