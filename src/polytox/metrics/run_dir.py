"""Metrics of a run directory for one of its scorers and attributes, read with DuckDB from its Parquet parts."""

from __future__ import annotations

from typing import Any

import duckdb

from ..spec import MetricsSpec
from .attributes import check_attribute
from .blocks import compute
from .per_prompt import per_prompt_table
from .rescaled import Rescale, rescaled_scores


def run_metrics(
    store_path: str,
    scorer_id: str,
    spec: MetricsSpec,
    seed: int = 0,
    rescale: tuple[str, Rescale] | None = None,
    attribute: str = "toxicity",
) -> dict[str, Any]:
    """Metrics of a run directory for one of its scorers, of one stored attribute (EMT / EP / AT of
    ``severe_toxicity`` ...; the prompts' toxicity buckets stay the prompts' toxicity).

    ``rescale`` (a scale's name and its map) recomputes them on another scale from the stored raw values
    (``toxicity_raw``), without scoring again; a stored score without a raw value (scored before raw values
    were kept) then counts as a missing score, and ``n_without_raw`` says how many there were.
    """
    from ..store.reader import RunReader

    store = RunReader(store_path)
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW generations AS SELECT prompt_id, sample_index, error "
        f"FROM read_parquet('{store.glob('generations')}')"
    )
    con.execute(
        f"CREATE VIEW prompts AS SELECT prompt_id, lang, toxicity, bucket FROM read_parquet('{store.prompts_path}')"
    )
    extra: dict[str, Any] = {"scorer": scorer_id}
    if attribute != "toxicity":
        extra["attribute"] = attribute
    if rescale is None:
        glob = store.glob("scores", scorer_id)
        check_attribute(con, glob, attribute, scorer_id)
        column = '"' + attribute.replace('"', '""') + '"'
        con.execute(
            f"CREATE VIEW scores AS SELECT prompt_id, sample_index, {column} AS toxicity "
            f"FROM read_parquet('{glob}', union_by_name=true)"
        )
    else:
        name, fn = rescale
        scores, n_without = rescaled_scores(con, store.glob("scores", scorer_id), fn)
        con.register("scores", scores)
        extra.update(scale=name, n_without_raw=n_without)
    table = per_prompt_table(con, spec)
    return compute(table, spec, seed, extra=extra)
