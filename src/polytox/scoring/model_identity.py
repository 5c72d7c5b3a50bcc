"""A short identity for a local checkpoint, part of a neural scorer's cache key.

The score cache is permanent, so a scorer's ``name@version`` must change whenever its weights do:
otherwise retraining a model in the same folder would silently return the old model's cached scores.
For a Hub id the identity is the resolved commit hash; for a local folder or file it is a digest of the
config and of each weight file's size and first and last MiB (cheap, and any retraining changes it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")
_EDGE = 1 << 20


def file_fingerprint(path: Path, digest: hashlib._Hash) -> None:
    """Feed ``path``'s name, size, first and last MiB into ``digest``."""
    size = path.stat().st_size
    digest.update(f"{path.name}\x1f{size}\x1f".encode())
    with path.open("rb") as fh:
        digest.update(fh.read(_EDGE))
        if size > _EDGE:
            fh.seek(max(_EDGE, size - _EDGE))
            digest.update(fh.read(_EDGE))


def local_fingerprint(path: str | Path) -> str:
    """12 hex digits identifying a checkpoint folder (config, tokenizer and weights) or a single file."""
    root = Path(path)
    digest = hashlib.sha256()
    files = (
        [root]
        if root.is_file()
        else sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and (p.suffix in WEIGHT_SUFFIXES or p.suffix == ".json" or p.name == "tokenizer.model")
        )
    )
    for file in files:
        file_fingerprint(file, digest)
    return digest.hexdigest()[:12]


def checkpoint_identity(name_or_path: str, commit_hash: str | None = None, revision: str = "") -> str:
    """``<short name>:<fingerprint or commit>`` for the manifest and the cache key."""
    path = Path(name_or_path)
    if path.exists():
        return f"{path.name}:{local_fingerprint(path)}"
    pin = (commit_hash or revision or "unpinned")[:12]
    return f"{name_or_path}:{pin}"
