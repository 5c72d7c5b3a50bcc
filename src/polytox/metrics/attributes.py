"""The attributes a scorer's stored parts hold, and the one-line refusal of one they do not."""

from __future__ import annotations

import duckdb


def stored_attributes(con: duckdb.DuckDBPyConnection, glob: str) -> list[str]:
    """The attribute columns of a scorer's stored parts (not the keys, the error or raw values)."""
    from ..types import RAW_SUFFIX

    columns = con.sql(f"SELECT * FROM read_parquet('{glob}', union_by_name=true) LIMIT 0").columns
    return [c for c in columns if c not in ("prompt_id", "sample_index", "error") and not c.endswith(RAW_SUFFIX)]


def check_attribute(con: duckdb.DuckDBPyConnection, glob: str, attribute: str, scorer_id: str) -> None:
    """One line naming the attributes stored when ``attribute`` is not one of them."""
    from ..errors import PolytoxError

    have = stored_attributes(con, glob)
    if attribute not in have:
        raise PolytoxError(
            f"the scores of {scorer_id} have no attribute {attribute!r}; they have: {', '.join(have)} "
            "(score with --scorer-opt attributes=rtp for all eight Perspective attributes)"
        )
