"""Whether a parsed manifest can be trusted: its own checksum, and a spec that loads and agrees with the
fields read beside it. Written by ``writer.write_manifest_file``; older layouts are read through
``migrate.migrate_manifest``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._util import checksum
from ..errors import DamagedRunError
from ..spec import EvalSpec
from .files import MANIFEST_DIGEST


def manifest_problem(data: dict[str, Any]) -> str | None:
    """Why a parsed manifest cannot be trusted as written (None: its checksum matches, or it predates them)."""
    digest = data.get(MANIFEST_DIGEST)
    if digest is None:
        fmt = data.get("polytox_run", 1)
        return f"has no checksum ({MANIFEST_DIGEST} is missing)" if not isinstance(fmt, int) or fmt >= 2 else None
    if checksum.json_digest({k: v for k, v in data.items() if k != MANIFEST_DIGEST}) != digest:
        return "does not match its checksum (it was edited after it was written)"
    return None


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
