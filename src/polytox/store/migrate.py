"""The run store's earlier manifest layouts, read in one place (``migrate_manifest``)."""

from __future__ import annotations

from typing import Any


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
