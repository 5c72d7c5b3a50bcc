"""A run's numbers derived from its continuation texts, computed once and kept in ``RUN/derived/``.

Distinct-n (``diversity.py``), the mean tokens per continuation and the share of empty continuations
depend on every stored continuation: reading 500K texts takes seconds, so they are computed when the run
is finished (``detox_metrics``) or first read, and kept with the identity of each generation part they
were computed from (``_util.derived``: its recorded SHA-256, size and modification time). A reader
recomputes them when any part differs (added, removed, repaired, rewritten), when the settings they
depend on differ (``DISTINCT_N``, the polytox version), or when the kept file is damaged: a stale or
damaged derived file is never trusted.

Each generation part is read once, for the three numbers together (prompt id, text and token count only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__
from .. import constants as C
from .._util import derived
from ..store.reader import RunReader
from .diversity import diversity

VERSION = 1  # bump when what is computed changes: a file of another version is recomputed


def derived_path(store: RunReader) -> Path:
    """Where a run's text-derived numbers are kept."""
    return store.path / "derived" / "text_stats.json"


def input_identities(store: RunReader) -> dict[str, str]:
    """Generation part path (relative to the run) -> identity, for every generation part of the run."""
    return derived.identities(store.path, (store.path / "generations").glob("part-*.parquet"))


def settings() -> dict[str, Any]:
    """What the numbers depend on besides the parts."""
    return {
        "what": "text_stats",
        "version": VERSION,
        "polytox": __version__,
        "distinct_n": list(C.DISTINCT_N),
        "tokens": "whitespace",
    }


def compute_text_stats(store: RunReader) -> dict[str, Any]:
    """``{"diversity": {...}, "lengths": {"mean_tokens", "empty_share"}}`` from the generation parts, each
    read once, in part order (so the float sums are the same on every call)."""
    import pyarrow.parquet as pq

    per_prompt: dict[str, list[str | None]] = {}
    n_text = tokens = empty = 0
    for part in sorted((store.path / "generations").glob("part-*.parquet")):
        table = pq.ParquetFile(part).read(columns=["prompt_id", "text", "n_tokens"])
        ids = table.column("prompt_id").to_pylist()
        texts = table.column("text").to_pylist()
        n_tokens = table.column("n_tokens").to_pylist()
        for pid, text, n in zip(ids, texts, n_tokens, strict=True):
            per_prompt.setdefault(pid, []).append(text)
            if text is not None:  # a failed generation has no length, it is not an empty one
                n_text += 1
                tokens += int(n or 0)
                empty += not text.strip()
    lengths = {
        "mean_tokens": tokens / n_text if n_text else None,
        "empty_share": empty / n_text if n_text else None,
    }
    return {"diversity": diversity(per_prompt), "lengths": lengths}


def text_stats(store: RunReader) -> dict[str, Any]:
    """The run's text-derived numbers: kept ones when they match the stored generation parts, else
    computed and kept (``_util.derived.memo``)."""
    return derived.memo(
        derived_path(store), settings(), lambda: input_identities(store), lambda: compute_text_stats(store)
    )
