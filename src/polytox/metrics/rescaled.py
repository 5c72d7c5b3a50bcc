"""Scores re-read on another scale from the stored raw values, without scoring again."""

from __future__ import annotations

from collections.abc import Callable

import duckdb
import numpy as np
import pyarrow as pa

# A read-time calibration: (raw values of one language, that language) -> values on another scale
# (scoring/ml/scales.py)
Rescale = Callable[[np.ndarray, str], np.ndarray]


def rescaled_scores(con: duckdb.DuckDBPyConnection, glob: str, fn: Rescale) -> tuple[pa.Table, int]:
    """(prompt_id, sample_index, toxicity, error) with toxicity = ``fn`` of the stored raw value and the
    prompt's language (view ``prompts`` on ``con``), and how many scored rows had no raw value (their
    toxicity becomes null: a missing score)."""
    from ..errors import PolytoxError
    from ..types import RAW_KEY

    columns = con.sql(f"SELECT * FROM read_parquet('{glob}', union_by_name=true) LIMIT 0").columns
    if RAW_KEY not in columns:
        raise PolytoxError(
            f"{glob}: the stored scores carry no raw values ({RAW_KEY}); they were scored before "
            "raw values were kept, so another scale cannot be read from them: score the run again"
        )
    rows = con.sql(f"""
        SELECT s.prompt_id, s.sample_index, s.toxicity, s.{RAW_KEY} AS raw, coalesce(p.lang, 'unknown') AS lang,
               s.error
        FROM read_parquet('{glob}', union_by_name=true) s LEFT JOIN prompts p USING (prompt_id)
    """).to_arrow_table()
    raw = rows.column("raw").to_numpy(zero_copy_only=False).astype(np.float64)  # null -> NaN
    langs = rows.column("lang").combine_chunks().dictionary_encode()
    codes = langs.indices.to_numpy(zero_copy_only=False)
    have = ~np.isnan(raw)
    values = np.full(len(raw), np.nan)
    for code, lang in enumerate(langs.dictionary.to_pylist()):  # one map per language: no per-row lookups
        sel = have & (codes == code)
        if sel.any():
            values[sel] = fn(raw[sel], str(lang))
    scored = rows.column("toxicity").is_valid().to_numpy(zero_copy_only=False)
    n_without = int(np.count_nonzero(scored & ~have))
    table = pa.table(
        {
            "prompt_id": rows.column("prompt_id"),
            "sample_index": rows.column("sample_index"),
            "toxicity": pa.array(values, mask=~have),
            "error": rows.column("error"),
        }
    )
    return table, n_without
