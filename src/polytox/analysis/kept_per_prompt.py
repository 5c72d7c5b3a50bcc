"""One run's per-prompt reduction, computed once and kept in ``RUN/derived/`` (``_util.derived``).

The leaderboard and the other analyses group a per-(run, prompt) table: the K continuations of each
prompt reduced to counts, max, mean and "any toxic" (``RunCollection.per_prompt``). Scanning every
generation and score part of every run for it is most of a leaderboard's time, so each run's reduction
is kept with the identities of its prompts file, generation parts and the scorer's score parts, the
attribute, threshold and comparison: a run read again costs one small file, and any change to its parts
or settings computes it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from .. import __version__
from .._util import derived
from ..spec import MetricsSpec
from ..store.reader import RunReader

# The reduction of one run, the same as ``RunCollection.per_prompt``'s for many (from the prompts, so a
# prompt of an unfinished shard, with no continuation yet, is a row too).
PER_PROMPT_SQL = """
WITH gs AS (
  SELECT g.prompt_id, g.sample_index, g.error, s.score
  FROM read_parquet({gens}) g
  LEFT JOIN (SELECT prompt_id, sample_index, CAST({column} AS DOUBLE) AS score
             FROM read_parquet({scores}, union_by_name = true)) s USING (prompt_id, sample_index)
)
SELECT p.prompt_id,
       count(gs.sample_index)::BIGINT AS n_generations,
       count(gs.error)::BIGINT AS n_failed_generations,
       count(gs.score)::BIGINT AS n_scored,
       max(gs.score) AS max_tox,
       avg(gs.score) AS mean_tox,
       bool_or(gs.score {cmp} $threshold) AS any_toxic,
       count(*) FILTER (WHERE gs.score {cmp} $threshold)::BIGINT AS n_toxic
FROM read_parquet({prompts}) p LEFT JOIN gs USING (prompt_id)
GROUP BY p.prompt_id
ORDER BY p.prompt_id
"""

SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("n_generations", pa.int64()),
        ("n_failed_generations", pa.int64()),
        ("n_scored", pa.int64()),
        ("max_tox", pa.float64()),
        ("mean_tox", pa.float64()),
        ("any_toxic", pa.bool_()),
        ("n_toxic", pa.int64()),
    ]
)


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def keepable(path: Path, directory: str) -> bool:
    """Whether a run has what the one-run reduction reads: prompts, generation and score parts."""
    store = RunReader(path)
    return (
        store.prompts_path.exists()
        and any((store.path / "generations").glob("part-*.parquet"))
        and any(store.scores_dir(directory).glob("part-*.parquet"))
    )


def kept_per_prompt(path: Path, directory: str, attribute: str, spec: MetricsSpec) -> pa.Table:
    """The per-prompt reduction of the run at ``path`` for the scores in ``scores/<directory>``."""
    store = RunReader(path)
    settings: dict[str, Any] = {
        "what": "per_prompt",
        "polytox": __version__,
        "scores": directory,
        "attribute": attribute,
        "threshold": spec.threshold,
        "comparison": spec.comparison,
    }

    def inputs() -> dict[str, str]:
        files = [store.prompts_path, *(store.path / "generations").glob("part-*.parquet")]
        files += store.scores_dir(directory).glob("part-*.parquet")
        return derived.identities(store.path, files)

    def compute() -> dict[str, Any]:
        sql = PER_PROMPT_SQL.format(
            gens=_lit(store.glob("generations")),
            scores=_lit(store.glob("scores", directory)),
            prompts=_lit(str(store.prompts_path)),
            column='"' + attribute.replace('"', '""') + '"',
            cmp=">=" if spec.comparison == ">=" else ">",
        )
        with duckdb.connect() as con:
            table = con.sql(sql, params={"threshold": spec.threshold}).to_arrow_table()
        return dict(table.cast(SCHEMA).to_pydict())

    file = store.path / "derived" / f"per_prompt-{derived.key(settings)}.json"
    return pa.table(derived.memo(file, settings, inputs, compute), schema=SCHEMA)
