"""Split an Arrow table into groups by key columns, and pull numeric columns out as NumPy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_INDEX = "__polytox_row"


def split(table: pa.Table, keys: Sequence[str]) -> dict[tuple[Any, ...], pa.Table]:
    """``{key tuple: sub-table}``, keys sorted (None sorts first), rows kept in table order.

    Grouping runs in Arrow (``Table.group_by`` collecting row indices), so it costs one pass in C++
    whatever the number of rows.
    """
    if table.num_rows == 0:
        return {}
    indexed = table.select(list(keys)).append_column(_INDEX, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    grouped = indexed.group_by(list(keys), use_threads=False).aggregate([(_INDEX, "list")])
    key_values = [grouped.column(k).to_pylist() for k in keys]
    rows = grouped.column(f"{_INDEX}_list")
    out: dict[tuple[Any, ...], pa.Table] = {}
    order = sorted(
        range(grouped.num_rows),
        key=lambda i: tuple((v[i] is not None, v[i] if v[i] is not None else "") for v in key_values),
    )
    for i in order:
        idx = np.sort(rows[i].values.to_numpy())
        out[tuple(v[i] for v in key_values)] = table.take(pa.array(idx))
    return out


def values(table: pa.Table, column: str) -> np.ndarray:
    """A numeric column as float64 with missing values as NaN."""
    col = table.column(column)
    if pa.types.is_boolean(col.type):
        col = col.cast(pa.int8())
    return np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def scored(table: pa.Table) -> pa.Table:
    """Only the prompts with at least one score (``n_scored > 0``): the rows the means run over."""
    mask = pa.array(values(table, "n_scored") > 0)
    return table.filter(mask)
