"""The records that flow through a build: ``Document`` (kept) and ``Rejected`` (dropped, with its reason).

A document is one unit that may become a prompt: a whole web document in PTP mode, a sentence span of
one in RTP mode (``parent_id``, ``begin``, ``end`` locate it in its document). Both are frozen; a step
that changes a document returns ``dataclasses.replace(doc, ...)``. Both have a fixed Parquet schema, so
every stage can be written as it goes and read back by the next one (or by DuckDB).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..constants import toxicity_bucket


@dataclass(frozen=True, slots=True)
class Document:
    """One candidate prompt source.

    ``lang`` is the language the pipeline uses (the declared one, or the detected one when none was
    declared); ``declared_lang`` / ``detected_lang`` keep both for the record. ``toxicity`` and
    ``scores`` are the scorer's values for ``text`` (cut to the scorer's byte budget; ``truncated``
    says whether it was cut). ``translated_from`` is the id of the source document of a machine
    translation (PTP §3.2), with its language and toxicity.
    """

    id: str
    text: str
    lang: str
    declared_lang: str | None = None
    detected_lang: str | None = None
    url: str | None = None
    timestamp: str | None = None
    location: str = ""
    data_category: str = "web"
    pile_set_name: str | None = None
    parent_id: str | None = None
    begin: int = 0
    end: int | None = None
    toxicity: float | None = None
    scores: Mapping[str, float] | None = None
    scorer: str | None = None
    truncated: bool = False
    translated_from: str | None = None
    source_lang: str | None = None
    source_toxicity: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bucket(self) -> int | None:
        """PTP's equal-width toxicity bin 0..3, or None when the document is unscored."""
        return toxicity_bucket(self.toxicity) if self.toxicity is not None else None

    @property
    def span_end(self) -> int:
        return self.end if self.end is not None else self.begin + len(self.text)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record a step dropped, with the step and the reason; the text is kept so nothing is lost."""

    step: str
    reason: str
    location: str = ""
    doc_id: str | None = None
    lang: str | None = None
    text: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, step: str, reason: str, doc: Document, **detail: Any) -> Rejected:
        return cls(
            step=step,
            reason=reason,
            location=doc.location,
            doc_id=doc.id,
            lang=doc.lang,
            text=doc.text,
            detail={**({"toxicity": doc.toxicity} if doc.toxicity is not None else {}), **detail},
        )


DOCUMENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("lang", pa.string()),
        ("declared_lang", pa.string()),
        ("detected_lang", pa.string()),
        ("url", pa.string()),
        ("timestamp", pa.string()),
        ("location", pa.string()),
        ("data_category", pa.string()),
        ("pile_set_name", pa.string()),
        ("parent_id", pa.string()),
        ("begin", pa.int64()),
        ("end", pa.int64()),
        ("toxicity", pa.float64()),
        ("bucket", pa.int8()),
        ("scores_json", pa.string()),
        ("scorer", pa.string()),
        ("truncated", pa.bool_()),
        ("translated_from", pa.string()),
        ("source_lang", pa.string()),
        ("source_toxicity", pa.float64()),
        ("extra_json", pa.string()),
    ]
)

REJECTED_SCHEMA = pa.schema(
    [
        ("step", pa.string()),
        ("reason", pa.string()),
        ("location", pa.string()),
        ("doc_id", pa.string()),
        ("lang", pa.string()),
        ("text", pa.string()),
        ("detail_json", pa.string()),
    ]
)

_PLAIN_FIELDS = [f.name for f in dataclasses.fields(Document) if f.name not in ("scores", "extra")]


def _dumps(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, default=str)


def documents_table(docs: Iterable[Document]) -> pa.Table:
    """Documents as a table of ``DOCUMENT_SCHEMA``."""
    rows = []
    for d in docs:
        row = {name: getattr(d, name) for name in _PLAIN_FIELDS}
        row["bucket"] = d.bucket
        row["scores_json"] = _dumps(d.scores)
        row["extra_json"] = _dumps(d.extra) if d.extra else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=DOCUMENT_SCHEMA)


def document_from_row(row: Mapping[str, Any]) -> Document:
    """Inverse of ``documents_table`` for one row (``pa.Table.to_pylist`` output)."""
    values: dict[str, Any] = {name: row.get(name) for name in _PLAIN_FIELDS}
    values["truncated"] = bool(values["truncated"])
    values["begin"] = int(values["begin"] or 0)
    values["data_category"] = values["data_category"] or "web"
    values["location"] = values["location"] or ""
    scores = json.loads(row["scores_json"]) if row.get("scores_json") else None
    extra = json.loads(row["extra_json"]) if row.get("extra_json") else {}
    return Document(**values, scores=scores, extra=extra)


def rejected_table(items: Iterable[Rejected]) -> pa.Table:
    rows = [
        {
            "step": r.step,
            "reason": r.reason,
            "location": r.location,
            "doc_id": r.doc_id,
            "lang": r.lang,
            "text": r.text,
            "detail_json": _dumps(r.detail) if r.detail else None,
        }
        for r in items
    ]
    return pa.Table.from_pylist(rows, schema=REJECTED_SCHEMA)
