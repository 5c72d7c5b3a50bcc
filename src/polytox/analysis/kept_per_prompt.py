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
from .per_prompt_sql import per_prompt_sql

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
        column = '"' + attribute.replace('"', '""') + '"'
        sql = per_prompt_sql(  # the same reduction as ``RunCollection.per_prompt``'s for many runs
            generations=f"read_parquet({_lit(store.glob('generations'))})",
            scores=f"(SELECT prompt_id, sample_index, CAST({column} AS DOUBLE) AS score "
            f"FROM read_parquet({_lit(store.glob('scores', directory))}, union_by_name = true))",
            prompts=f"read_parquet({_lit(str(store.prompts_path))})",
            keys=("prompt_id",),
            cmp=">=" if spec.comparison == ">=" else ">",
            order=True,
        )
        with duckdb.connect() as con:
            table = con.sql(sql, params={"threshold": spec.threshold}).to_arrow_table()
        return dict(table.cast(SCHEMA).to_pydict())

    file = store.path / "derived" / f"per_prompt-{derived.key(settings)}.json"
    return pa.table(derived.memo(file, settings, inputs, compute), schema=SCHEMA)
