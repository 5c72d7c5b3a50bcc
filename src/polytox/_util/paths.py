"""Where polytox keeps what it caches: converted models, scores, embeddings."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$POLYTOX_CACHE_DIR``, else ``$XDG_CACHE_HOME/polytox``, else ``~/.cache/polytox``."""
    if os.environ.get("POLYTOX_CACHE_DIR"):
        return Path(os.environ["POLYTOX_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "polytox"
