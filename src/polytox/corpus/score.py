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

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._util.runlock import OutputLock
from ..errors import PolytoxError
from ..executors import ExecutorConfig
from ..prompts.readers import RawRecord
from ..promptset.scoring import open_scorer
from .documents import STATUSES, iter_raw
from .shard import ScoreJob, score_shard
from .store import ScoreStore

Progress = Callable[[int, int], None]  # (documents done, shards done)


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


def todo_shards(
    store: ScoreStore, job: ScoreJob, retry_transient: bool, counter: list[int]
) -> Iterator[tuple[int, list[RawRecord]]]:
    """The shards that still need a part; ``counter = [shards seen, shards skipped]`` is updated."""
    for index, raws in shard_stream(iter_raw(job.source), job.shard_size):
        counter[0] += 1
        if store.has_part(index):
            store.remove_if_damaged(index, len(raws))  # a torn or short part is scored again
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
        trunc, transient = con.execute(
            f"SELECT count(*) FILTER (WHERE truncated), count(*) FILTER (WHERE transient) FROM read_parquet('{glob}')"
        ).fetchone() or (0, 0)
        summary.truncated, summary.transient = int(trunc), int(transient)
    summary.status_counts = counts


def run_score(
    job: ScoreJob,
    out: str,
    executor: ExecutorConfig | None = None,
    retry_transient: bool = False,
    progress: Progress | None = None,
) -> ScoreSummary:
    """Score every shard of ``job`` that ``out`` lacks (see the module docstring)."""
    executor = executor or ExecutorConfig(kind="serial")
    job.source.check()  # a missing input or a bad scorer fails before the output folder exists
    check_text_field(job)
    scorer = open_scorer(job.scorer, job.scorer_options)
    store = ScoreStore(out)
    with OutputLock(store.path):  # one writer per output folder; refused at once, naming the holder
        try:
            return _score_locked(job, store, scorer, executor, retry_transient, progress)
        except BaseException:
            store.discard_if_new()  # a refusal (or a failure) before the first part leaves nothing behind
            raise


PEEK = 100  # records read before the work to check that the text field is there


def check_text_field(job: ScoreJob) -> None:
    """Refuse before any output exists when the input is empty, or when none of its first records has text
    under the text field (RTP records keep it under ``prompt.text``): scoring them would store only
    'empty' documents."""
    from ..promptset.readers import TEXT_FIELDS, first_field

    records = [raw.record for raw in itertools.islice(iter_raw(job.source), PEEK)]
    if not records:
        raise PolytoxError(f"no documents in {job.source.describe()}: the input is empty")
    objects = [r for r in records if isinstance(r, dict)]
    if not objects or any(first_field(r, job.fields.text, TEXT_FIELDS) is not None for r in objects):
        return
    tried = job.fields.text or ", ".join(TEXT_FIELDS)
    hint = " (RTP records: --text-field prompt.text)" if isinstance(objects[0].get("prompt"), dict) else ""
    raise PolytoxError(
        f"{job.source.describe()}: none of the first {len(objects)} record(s) has text under "
        f"{tried}; name the text field with --text-field{hint}"
    )


def _score_locked(
    job: ScoreJob,
    store: ScoreStore,
    scorer: Any,
    executor: ExecutorConfig,
    retry_transient: bool,
    progress: Progress | None,
) -> ScoreSummary:
    out = str(store.path)
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
    store.update(
        complete=True,
        shards=summary.shards_total,
        status_counts=summary.status_counts,
        truncated=summary.truncated,
        transient=summary.transient,
        job=job.to_dict(),
        scorer=scorer.describe(),
    )
    return summary
