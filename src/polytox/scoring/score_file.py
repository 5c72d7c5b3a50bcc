"""Score a table of texts with one scorer and write the result (``polytox score``).

Output: one row per input row, in input order, with columns ``id``, ``lang``, ``lang_detected``,
``scorer`` (its ``name@version``), ``toxicity`` and the scorer's other attributes (null when the row
failed), ``toxicity_raw`` where the scorer keeps its uncalibrated value (``polytox-ml``, ``default``; null
for a score read from a cache row written before raw values were kept), and ``error`` (null when the row
scored). JSONL or Parquet, chosen by the extension, written
atomically at the end; work is resumable through the score cache (a rerun scores only what is not cached,
and retries transient errors, which are never cached).

Rows are scored in chunks; a thread-safe scorer (Perspective) gets several chunks in flight, so a slow
request at the end of one chunk never leaves the quota idle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .._util.atomic import atomic_write
from ..errors import PolytoxError
from ..types import Score, raw_name
from .base import Scorer
from .textio import TextRow, json_line

IN_FLIGHT_THREAD_SAFE = 8
ProgressCallback = Callable[[str, int, int], None]


def output_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    raise PolytoxError(f"{path}: the output must end in .jsonl or .parquet")


def error_kind(error: str) -> str:
    """The leading code of an error message (``PERSPECTIVE_400 COMMENT_EMPTY: ...`` -> its first words)."""
    head = error.split(":", 1)[0]
    return head if len(head) <= 80 else head[:80]


@dataclass
class ScoreSummary:
    rows: int = 0
    scored: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    transient: int = 0
    cache_hits: int | None = None
    lang_detected: int = 0


def score_rows(
    scorer: Scorer, rows: Sequence[TextRow], chunk_size: int = 0, progress: ProgressCallback | None = None
) -> list[Score]:
    """One ``Score`` per row: rows with an input error get that error; the others go to the scorer."""
    report = progress or (lambda stage, done, total: None)
    out: list[Score] = [Score.failed(r.error) if r.error else Score.failed("internal: unscored") for r in rows]
    todo = [i for i, r in enumerate(rows) if r.error is None]
    size = chunk_size or (32 if scorer.thread_safe else max(1, min(scorer.batch_size, 1024)))
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    done = len(rows) - len(todo)
    report("score", done, len(rows))

    def run(chunk: list[int]) -> list[Score]:
        return scorer.score([rows[i].text or "" for i in chunk], [rows[i].lang or "" for i in chunk])

    def finish(chunk: list[int], scores: list[Score]) -> None:
        nonlocal done
        for i, s in zip(chunk, scores, strict=True):
            out[i] = s
        done += len(chunk)
        report("score", done, len(rows))

    if scorer.thread_safe and len(chunks) > 1:
        with ThreadPoolExecutor(max_workers=IN_FLIGHT_THREAD_SAFE, thread_name_prefix="score-chunk") as pool:
            pending: list[tuple[list[int], Future[list[Score]]]] = []
            for chunk in chunks:
                pending.append((chunk, pool.submit(run, chunk)))
                if len(pending) >= IN_FLIGHT_THREAD_SAFE:
                    first, fut = pending.pop(0)
                    finish(first, fut.result())
            for chunk, fut in pending:
                finish(chunk, fut.result())
    else:
        for chunk in chunks:
            finish(chunk, run(chunk))
    return out


def summarize(rows: Sequence[TextRow], scores: Sequence[Score]) -> ScoreSummary:
    summary = ScoreSummary(rows=len(rows), lang_detected=sum(r.lang_detected for r in rows))
    for score in scores:
        if score.ok:
            summary.scored += 1
        else:
            summary.errors[error_kind(score.error or "")] += 1
            summary.transient += int(score.transient)
    return summary


def write_score_table(
    path: Path, rows: Sequence[TextRow], scores: Sequence[Score], scorer_id: str, attributes: Sequence[str]
) -> None:
    """Write the output table (see the module docstring), atomically."""
    attrs = ["toxicity", *[a for a in attributes if a != "toxicity"]]
    # raw (uncalibrated) values beside their attribute where the scorer keeps them (types.RAW_SUFFIX)
    attrs += [raw_name(a) for a in list(attrs) if any(s.get(raw_name(a)) is not None for s in scores)]
    reserved = {"id", "lang", "lang_detected", "part", "scorer", "error"}
    clash = reserved & set(attrs)
    if clash:
        raise PolytoxError(f"scorer attribute name(s) {sorted(clash)} clash with output columns")
    with_part = any(r.part is not None for r in rows)
    columns: dict[str, list[Any]] = {"id": [r.id for r in rows]}
    if with_part:
        columns["part"] = [r.part for r in rows]
    columns["lang"] = [r.lang for r in rows]
    columns["lang_detected"] = [r.lang_detected for r in rows]
    columns["scorer"] = [scorer_id] * len(rows)
    for attr in attrs:
        columns[attr] = [s.get(attr) for s in scores]
    columns["error"] = [s.error for s in scores]

    kind = output_kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        schema = pa.schema(
            [
                ("id", pa.string()),
                *([("part", pa.string())] if with_part else []),
                ("lang", pa.string()),
                ("lang_detected", pa.bool_()),
                ("scorer", pa.string()),
                *[(a, pa.float64()) for a in attrs],
                ("error", pa.string()),
            ]
        )
        table = pa.Table.from_pydict(columns, schema=schema)
        atomic_write(path, lambda tmp: pq.write_table(table, tmp))
        return

    def write(tmp: str) -> None:
        names = list(columns)
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as fh:
            for i in range(len(rows)):
                fh.write(json_line({n: columns[n][i] for n in names}) + "\n")

    atomic_write(path, write)
