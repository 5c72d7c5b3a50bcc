"""``polytox corpus score``: stream a corpus through any registered scorer into resumable Parquet parts.

The raw record stream is cut into shards of ``shard_size`` records in stream order; shard ``i`` is
converted (``documents.to_doc``), scored and written as one atomic part (``store.ScoreStore``). A rerun
skips the shards already written without converting or scoring them, so a killed run resumes where it
stopped. Scorers come from the registry (``build_scorer``) with their persistent score cache, so texts
scored before a kill are not sent to the scorer again either.

Every record becomes one row, whatever its status (``documents.STATUSES``): a failed score is stored with
its error (``score_failed``, ``transient`` when worth retrying: ``--retry-transient`` redoes those shards),
never dropped and never turned into 0. Texts above the scorer's byte budget (20,480 UTF-8 bytes, PTP
Appendix A) are cut before scoring and flagged ``truncated``.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..build.readers import CorpusSource, FieldMap
from ..build.scoring import open_scorer, score_texts
from ..constants import PERSPECTIVE_MAX_BYTES
from ..errors import PolytoxError
from ..executors import ExecutorConfig
from ..prompts.readers import RawRecord
from ..scoring import Scorer
from .documents import STATUSES, CorpusDoc, iter_raw, to_doc
from .store import ScoreStore, meta_column, part_schema

DEFAULT_SHARD_SIZE = 1_000
Progress = Callable[[int, int], None]  # (documents done, shards done)


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
        return {"source": self.source.describe(), "limit": self.source.limit,
                "fields": dataclasses.asdict(self.fields), "scorer": scorer.id,
                "attributes": list(scorer.attributes), "keep": list(self.keep), "shard_size": self.shard_size,
                "detect_lang": self.detect_lang, "max_bytes": self.max_bytes}

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
        return cls(source=source, fields=FieldMap(**values.pop("fields")), keep=tuple(values.pop("keep")),
                   **values)


@dataclass
class ScoreSummary:
    """What one ``run_score`` call did, and the totals over all parts."""

    out: str
    resumed: bool
    shards_total: int = 0
    shards_done_before: int = 0
    shards_scored: int = 0
    documents_scored_now: int = 0
    seconds: float = 0.0
    status_counts: dict[str, int] = field(default_factory=dict)
    truncated: int = 0
    transient: int = 0
    executor: dict[str, Any] = field(default_factory=dict)

    @property
    def docs_per_second(self) -> float:
        return self.documents_scored_now / self.seconds if self.seconds > 0 else 0.0


def shard_stream(raws: Iterator[RawRecord], size: int) -> Iterator[tuple[int, list[RawRecord]]]:
    """``(index, records)`` of consecutive ``size``-record shards."""
    for index in itertools.count():
        chunk = list(itertools.islice(raws, size))
        if not chunk:
            return
        yield index, chunk


def score_docs(scorer: Scorer, docs: Sequence[CorpusDoc], job: ScoreJob) -> pa.Table:
    """One shard's documents as a part table: scores for the ``ok`` ones, the reason for the others."""
    attributes = list(scorer.attributes)
    rows: list[dict[str, Any]] = []
    todo: list[int] = []
    for doc in docs:
        row: dict[str, Any] = {"doc_id": doc.doc_id, "location": doc.location, "url": doc.url,
                               "domain": doc.domain, "lang": doc.lang, "lang_source": doc.lang_source,
                               "length_chars": doc.length_chars, "length_bytes": doc.length_bytes,
                               "status": doc.status, "truncated": False, "error": doc.error, "transient": False,
                               "scorer": scorer.id}
        row.update({meta_column(k): doc.meta.get(k) for k in job.keep})
        if doc.status == "ok" and not scorer.supports(doc.lang):
            row["status"] = "unsupported_language"
            row["error"] = f"scorer {scorer.name!r} does not support language {doc.lang!r}"
        elif doc.status == "ok":
            todo.append(len(rows))
        rows.append(row)
    if todo:
        scores, cut = score_texts(scorer, [docs[i].text for i in todo], [docs[i].lang for i in todo],
                                  job.max_bytes)
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


def todo_shards(store: ScoreStore, job: ScoreJob, retry_transient: bool,
                counter: list[int]) -> Iterator[tuple[int, list[RawRecord]]]:
    """The shards that still need a part; ``counter = [shards seen, shards skipped]`` is updated."""
    for index, raws in shard_stream(iter_raw(job.source), job.shard_size):
        counter[0] += 1
        if store.has_part(index) and not (retry_transient and store.has_transient(index)):
            counter[1] += 1
            continue
        yield index, raws


def summarize_parts(store: ScoreStore, summary: ScoreSummary) -> None:
    """Fill the totals over every part (status counts, truncated, transient)."""
    import duckdb

    counts = dict.fromkeys(STATUSES, 0)
    if store.part_files():
        con = duckdb.connect()
        glob = store.glob().replace("'", "''")
        for status, n in con.execute(f"SELECT status, count(*) FROM read_parquet('{glob}') GROUP BY 1").fetchall():
            counts[str(status)] = int(n)
        trunc, transient = con.execute(f"SELECT count(*) FILTER (WHERE truncated), count(*) FILTER (WHERE "
                                       f"transient) FROM read_parquet('{glob}')").fetchone() or (0, 0)
        summary.truncated, summary.transient = int(trunc), int(transient)
    summary.status_counts = counts


def run_score(job: ScoreJob, out: str, executor: ExecutorConfig | None = None, retry_transient: bool = False,
              progress: Progress | None = None) -> ScoreSummary:
    """Score every shard of ``job`` that ``out`` lacks (see the module docstring)."""
    executor = executor or ExecutorConfig(kind="serial")
    job.source.check()  # a missing input or a bad scorer fails before the output folder exists
    scorer = open_scorer(job.scorer, job.scorer_options)
    store = ScoreStore(out)
    resumed = store.open(job.identity(scorer))
    summary = ScoreSummary(out=str(out), resumed=resumed)
    counter = [0, 0]
    todo = todo_shards(store, job, retry_transient, counter)
    start = time.perf_counter()
    try:
        if executor.kind == "ray":
            from .ray import ray_score

            summary.executor = ray_score(job, store, scorer, todo, executor, summary, progress)
        else:
            summary.executor = {"executor": "serial"}
            for index, raws in todo:
                table = score_shard(scorer, raws, job)
                store.write_part(index, table)
                summary.shards_scored += 1
                summary.documents_scored_now += table.num_rows
                if progress is not None:
                    progress(summary.documents_scored_now, summary.shards_scored)
    finally:
        scorer.close()
    if not counter[0]:
        raise PolytoxError(f"no documents in {job.source.describe()}: the input is empty")
    summary.seconds = time.perf_counter() - start
    summary.shards_total, summary.shards_done_before = counter
    summarize_parts(store, summary)
    store.update(complete=True, shards=summary.shards_total, status_counts=summary.status_counts,
                 truncated=summary.truncated, transient=summary.transient, job=job.to_dict(),
                 scorer=scorer.describe())
    return summary
