"""One shard of ``corpus score``: the job's settings and the function every executor runs on a shard.

A leaf of the corpus package: the local executor (``score``) and the Ray Data actor (``shard_scorer``) both
import it, so a shard's part is the same whichever executor made it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..constants import PERSPECTIVE_MAX_BYTES
from ..prompts.readers import RawRecord
from ..promptset.readers import CorpusSource, FieldMap
from ..promptset.scoring import score_texts
from ..scoring import Scorer
from .documents import CorpusDoc, to_doc
from .store import meta_column, part_schema

DEFAULT_SHARD_SIZE = 1_000


@dataclass(frozen=True)
class ScoreJob:
    """What to score and how (everything here is part of the output's identity, see ``identity``)."""

    source: CorpusSource
    fields: FieldMap = field(default_factory=FieldMap)
    scorer: str = "default"
    scorer_options: Mapping[str, str] = field(default_factory=dict)
    keep: tuple[str, ...] = ()
    shard_size: int = DEFAULT_SHARD_SIZE
    detect_lang: bool = True
    max_bytes: int = PERSPECTIVE_MAX_BYTES

    def identity(self, scorer: Scorer) -> dict[str, Any]:
        return {
            "source": self.source.describe(),
            "limit": self.source.limit,
            "fields": dataclasses.asdict(self.fields),
            "scorer": scorer.id,
            "attributes": list(scorer.attributes),
            "keep": list(self.keep),
            "shard_size": self.shard_size,
            "detect_lang": self.detect_lang,
            "max_bytes": self.max_bytes,
        }

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["scorer_options"] = dict(self.scorer_options)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreJob:
        values = dict(data)
        src = dict(values.pop("source"))
        source_args: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in src.items()}
        source = CorpusSource(**source_args)
        return cls(source=source, fields=FieldMap(**values.pop("fields")), keep=tuple(values.pop("keep")), **values)


def score_docs(scorer: Scorer, docs: Sequence[CorpusDoc], job: ScoreJob) -> pa.Table:
    """One shard's documents as a part table: scores for the ``ok`` ones, the reason for the others."""
    attributes = list(scorer.attributes)
    rows: list[dict[str, Any]] = []
    todo: list[int] = []
    for doc in docs:
        row: dict[str, Any] = {
            "doc_id": doc.doc_id,
            "location": doc.location,
            "url": doc.url,
            "domain": doc.domain,
            "lang": doc.lang,
            "lang_source": doc.lang_source,
            "length_chars": doc.length_chars,
            "length_bytes": doc.length_bytes,
            "status": doc.status,
            "truncated": False,
            "error": doc.error,
            "transient": False,
            "scorer": scorer.id,
        }
        row.update({meta_column(k): doc.meta.get(k) for k in job.keep})
        if doc.status == "ok" and not scorer.supports(doc.lang):
            row["status"] = "unsupported_language"
            row["error"] = f"scorer {scorer.name!r} does not support language {doc.lang!r}"
        elif doc.status == "ok":
            todo.append(len(rows))
        rows.append(row)
    if todo:
        scores, cut = score_texts(scorer, [docs[i].text for i in todo], [docs[i].lang for i in todo], job.max_bytes)
        for i, score, was_cut in zip(todo, scores, cut, strict=True):
            row = rows[i]
            row["truncated"] = was_cut
            if score.ok and score.get("toxicity") is not None:
                row.update({a: score.get(a) for a in attributes})
            else:
                row["status"] = "score_failed"
                row["error"] = score.error or "the scorer returned no toxicity value"
                row["transient"] = score.transient
    return pa.Table.from_pylist(rows, schema=part_schema(attributes, job.keep))


def score_shard(scorer: Scorer, raws: Sequence[RawRecord], job: ScoreJob) -> pa.Table:
    """Convert and score one shard of raw records (the unit both executors run)."""
    return score_docs(scorer, [to_doc(r, job.fields, job.keep, job.detect_lang) for r in raws], job)
