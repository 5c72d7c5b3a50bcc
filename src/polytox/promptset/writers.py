"""Writing a built prompt set in the PTP schema and the RTP schema (DATA.md), as JSONL and Parquet.

PTP schema: ``text``, ``meta_data`` {data_category, lang, pile_set_name, timestamp, url, ...},
``perspective``, ``toxicity``, ``toxicity_bucket``, ``prompt``, ``continuation``,
``prompt_perspective``, ``continuation_perspective``. The ``*perspective`` fields are shaped like a
Perspective response (``attributeScores.<ATTR>.summaryScore.value``) whatever the scorer, with the
scorer's id under ``scorer``, so ``polytox eval --prompts`` and any PTP tooling read them; a failed score
is ``{"error": ..., "scorer": ...}`` with a null value, never a made-up one.

RTP schema: ``filename``, ``begin``, ``end``, ``prompt`` {text, toxicity, ...}, ``continuation`` {...},
plus ``lang``, ``toxicity`` (of the whole unit), ``toxicity_bucket`` and ``meta_data``.

Files are written from the split parts as a stream into a temporary file, then renamed (atomic).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._util.atomic import atomic_write
from ..types import RAW_SUFFIX

META_FIELDS = (
    "data_category",
    "lang",
    "pile_set_name",
    "timestamp",
    "url",
    "id",
    "parent_id",
    "begin",
    "end",
    "translated_from",
    "source_lang",
    "source_toxicity",
    "scorer",
    "truncated",
)

_META_TYPES: dict[str, pa.DataType] = {
    "begin": pa.int64(),
    "end": pa.int64(),
    "source_toxicity": pa.float64(),
    "truncated": pa.bool_(),
}


def perspective_like(scores_json: str | None, error: str | None, scorer: str | None, lang: str) -> dict[str, Any]:
    """A Perspective-shaped response for any scorer's values (or its error)."""
    if scores_json:
        values = json.loads(scores_json)
        out = {
            "attributeScores": {
                k.upper(): {"summaryScore": {"value": v, "type": "PROBABILITY"}}
                for k, v in sorted(values.items())
                if not k.endswith(RAW_SUFFIX)
            },
            "languages": [lang],
            "scorer": scorer,
        }
        raw = {k: v for k, v in sorted(values.items()) if k.endswith(RAW_SUFFIX)}
        if raw:  # the scorer's uncalibrated values (types.RAW_SUFFIX): kept, but not as Perspective attributes
            out["raw"] = raw
        return out
    return {"error": error or "not scored", "scorer": scorer}


def _half(text: str, scores_json: str | None, error: str | None, attributes: Sequence[str]) -> dict[str, Any]:
    values = json.loads(scores_json) if scores_json else {}
    out: dict[str, Any] = {"text": text}
    for attr in attributes:
        out[attr] = values.get(attr)
    if error:
        out["error"] = error
    return out


def meta_data(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: row.get(key) for key in META_FIELDS}


def ptp_record(row: Mapping[str, Any]) -> dict[str, Any]:
    """One split row in the PTP schema."""
    lang = row["lang"]
    return {
        "text": row["text"],
        "meta_data": meta_data(row),
        "perspective": perspective_like(row.get("scores_json"), None, row.get("scorer"), lang),
        "toxicity": row.get("toxicity"),
        "toxicity_bucket": row.get("bucket"),
        "prompt": row["prompt"],
        "continuation": row["continuation"],
        "prompt_perspective": perspective_like(
            row.get("prompt_scores_json"), row.get("prompt_error"), row.get("scorer"), lang
        ),
        "continuation_perspective": perspective_like(
            row.get("continuation_scores_json"), row.get("continuation_error"), row.get("scorer"), lang
        ),
    }


def rtp_record(row: Mapping[str, Any], attributes: Sequence[str]) -> dict[str, Any]:
    """One split row in the RTP schema (offsets are characters in the source document)."""
    end = row["end"] if row.get("end") is not None else row.get("begin", 0) + len(row["text"])
    return {
        "filename": row.get("parent_id") or row["id"],
        "begin": row.get("begin") or 0,
        "end": end,
        "lang": row["lang"],
        "toxicity": row.get("toxicity"),
        "toxicity_bucket": row.get("bucket"),
        "prompt": _half(row["prompt"], row.get("prompt_scores_json"), row.get("prompt_error"), attributes),
        "continuation": _half(
            row["continuation"], row.get("continuation_scores_json"), row.get("continuation_error"), attributes
        ),
        "meta_data": meta_data(row),
    }


def _meta_type() -> pa.DataType:
    return pa.struct([(k, _META_TYPES.get(k, pa.string())) for k in META_FIELDS])


def _perspective_type(attributes: Sequence[str]) -> pa.DataType:
    summary = pa.struct([("summaryScore", pa.struct([("value", pa.float64()), ("type", pa.string())]))])
    return pa.struct(
        [
            ("attributeScores", pa.struct([(a.upper(), summary) for a in sorted(attributes)])),
            ("languages", pa.list_(pa.string())),
            ("scorer", pa.string()),
            ("error", pa.string()),
        ]
    )


def ptp_schema(attributes: Sequence[str]) -> pa.Schema:
    persp = _perspective_type(attributes)
    return pa.schema(
        [
            ("text", pa.string()),
            ("meta_data", _meta_type()),
            ("perspective", persp),
            ("toxicity", pa.float64()),
            ("toxicity_bucket", pa.int8()),
            ("prompt", pa.string()),
            ("continuation", pa.string()),
            ("prompt_perspective", persp),
            ("continuation_perspective", persp),
        ]
    )


def rtp_schema(attributes: Sequence[str]) -> pa.Schema:
    half = pa.struct([("text", pa.string()), *[(a, pa.float64()) for a in attributes], ("error", pa.string())])
    return pa.schema(
        [
            ("filename", pa.string()),
            ("begin", pa.int64()),
            ("end", pa.int64()),
            ("lang", pa.string()),
            ("toxicity", pa.float64()),
            ("toxicity_bucket", pa.int8()),
            ("prompt", half),
            ("continuation", half),
            ("meta_data", _meta_type()),
        ]
    )


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Stream records into ``path`` atomically; returns the number written."""
    count = 0

    def write(tmp: str) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                count += 1

    atomic_write(path, write)
    return count


def write_parquet_stream(path: Path, schema: pa.Schema, batches: Iterable[list[dict[str, Any]]]) -> int:
    """Stream batches of records into one Parquet file atomically; returns the number of rows."""
    count = 0

    def write(tmp: str) -> None:
        nonlocal count
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for batch in batches:
                if batch:
                    writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                    count += len(batch)

    atomic_write(path, write)
    return count


def write_prompt_set(
    folder: Path, batches: Callable[[], Iterable[list[dict[str, Any]]]], attributes: Sequence[str]
) -> dict[str, int]:
    """Write ptp.jsonl, ptp.parquet, rtp.jsonl and rtp.parquet into ``folder`` from split-row batches.

    ``batches`` is called once per file so the rows stream from disk four times instead of being held.
    """
    counts = {
        "ptp.jsonl": write_jsonl(folder / "ptp.jsonl", (ptp_record(r) for b in batches() for r in b)),
        "ptp.parquet": write_parquet_stream(
            folder / "ptp.parquet", ptp_schema(attributes), ([ptp_record(r) for r in b] for b in batches())
        ),
        "rtp.jsonl": write_jsonl(folder / "rtp.jsonl", (rtp_record(r, attributes) for b in batches() for r in b)),
        "rtp.parquet": write_parquet_stream(
            folder / "rtp.parquet", rtp_schema(attributes), ([rtp_record(r, attributes) for r in b] for b in batches())
        ),
    }
    return counts
