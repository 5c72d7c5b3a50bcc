"""Splitting the selected units into prompt and continuation and scoring both halves.

Works through ``selected.parquet`` in shards; each shard's output part carries a marker with a digest of
the unit ids it covers, so a rerun skips finished shards and redoes a shard whose selection changed.
A half whose score failed keeps a null value and its error (counted in the report), never a made-up 0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util.atomic import atomic_write_json
from ..scoring import Scorer
from ..types import Score
from .document import DOCUMENT_SCHEMA
from .scoring import TOXICITY, score_texts
from .split import split_unit
from .store import BuildStore, read_json, write_table

SPLIT_SCHEMA = pa.schema(
    [
        *DOCUMENT_SCHEMA,
        ("rank", pa.int64()),
        ("prompt", pa.string()),
        ("continuation", pa.string()),
        ("cut", pa.int64()),
        ("n_words", pa.int64()),
        ("prompt_words", pa.int64()),
        ("prompt_scores_json", pa.string()),
        ("prompt_error", pa.string()),
        ("prompt_toxicity", pa.float64()),
        ("continuation_scores_json", pa.string()),
        ("continuation_error", pa.string()),
        ("continuation_toxicity", pa.float64()),
    ]
)


def _ids_digest(ids: list[str]) -> str:
    return hashlib.sha256("\x1f".join(ids).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _score_fields(prefix: str, score: Score) -> dict[str, Any]:
    if score.ok and score.get(TOXICITY) is not None:
        return {
            f"{prefix}_scores_json": json.dumps(dict(score.values or {}), sort_keys=True),
            f"{prefix}_error": None,
            f"{prefix}_toxicity": score.get(TOXICITY),
        }
    return {
        f"{prefix}_scores_json": None,
        f"{prefix}_error": score.error or "no toxicity value",
        f"{prefix}_toxicity": None,
    }


def split_rows(
    rows: list[dict[str, Any]], scorer: Scorer, mode: str, max_prompt_tokens: int, max_bytes: int
) -> tuple[list[dict[str, Any]], int]:
    """Split and score one shard of selected rows; returns the rows and the number of transient errors."""
    out = []
    for row in rows:
        result = split_unit(row["text"], row["lang"], mode, max_prompt_tokens)
        if result is None:  # the Splittable step makes this unreachable for units it checked
            raise RuntimeError(f"unit {row['id']} cannot be split; it should have been rejected before scoring")
        out.append(
            {
                **row,
                "prompt": result.prompt,
                "continuation": result.continuation,
                "cut": result.cut,
                "n_words": result.n_tokens,
                "prompt_words": result.prompt_tokens,
            }
        )
    langs = [r["lang"] for r in out]
    prompt_scores, _ = score_texts(scorer, [r["prompt"] for r in out], langs, max_bytes)
    cont_scores, _ = score_texts(scorer, [r["continuation"] for r in out], langs, max_bytes)
    transient = 0
    for row, ps, cs in zip(out, prompt_scores, cont_scores, strict=True):
        row.update(_score_fields("prompt", ps))
        row.update(_score_fields("continuation", cs))
        transient += int(ps.transient) + int(cs.transient)
    return out, transient


def split_and_score(
    store: BuildStore,
    scorer: Scorer,
    mode: str,
    shard_size: int,
    max_prompt_tokens: int,
    max_bytes: int,
    progress: Callable[[str, int, int | None], None],
) -> dict[str, int]:
    """Run the split stage over ``selected.parquet``; returns counters."""
    pf = pq.ParquetFile(store.selected_path)
    total = pf.metadata.num_rows
    counters = {"shards": 0, "shards_skipped": 0, "units": 0, "transient_errors": 0}
    done = 0
    shard = -1
    for shard, batch in enumerate(pf.iter_batches(batch_size=shard_size)):
        rows = batch.to_pylist()
        digest = _ids_digest([r["id"] for r in rows])
        marker = store.split_marker(shard)
        if marker.exists() and store.split_part(shard).exists():
            stored = read_json(marker)
            if stored.get("ids") == digest and not stored.get("transient_errors"):
                counters["shards_skipped"] += 1
                done += len(rows)
                progress("split+score halves", done, total)
                continue
        out, transient = split_rows(rows, scorer, mode, max_prompt_tokens, max_bytes)
        write_table(store.split_part(shard), pa.Table.from_pylist(out, schema=SPLIT_SCHEMA))
        atomic_write_json(marker, {"ids": digest, "rows": len(out), "transient_errors": transient})
        counters["shards"] += 1
        counters["transient_errors"] += transient
        done += len(rows)
        progress("split+score halves", done, total)
    n_shards = shard + 1 if total else 0  # batches never span row groups, so count them, not rows / size
    store.clear_split_from(n_shards)
    counters["units"] = total
    counters["n_shards"] = n_shards
    return counters


def iter_split_batches(
    store: BuildStore, n_shards: int, keep: set[str] | None = None, batch_size: int = 1024
) -> Iterator[list[dict[str, Any]]]:
    """Split rows batch by batch, optionally only those whose id is in ``keep``."""
    for path in store.split_parts(n_shards):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size):
            rows = batch.to_pylist()
            if keep is not None:
                rows = [r for r in rows if r["id"] in keep]
            if rows:
                yield rows
