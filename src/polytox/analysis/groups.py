"""Split an Arrow table into groups by key columns, and pull numeric columns out as NumPy arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def split(table: pa.Table, keys: Sequence[str]) -> dict[tuple[Any, ...], pa.Table]:
    """``{key tuple: sub-table}``, keys sorted (None sorts first), rows kept in table order."""
    columns = [table.column(k).to_pylist() for k in keys]
    index: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(zip(*columns, strict=True)):
        index.setdefault(key, []).append(i)
    order = sorted(index, key=lambda k: tuple((v is not None, v if v is not None else "") for v in k))
    return {k: table.take(pa.array(index[k], type=pa.int64())) for k in order}


def values(table: pa.Table, column: str) -> np.ndarray:
    """A numeric column as float64 with missing values as NaN."""
    arr = table.column(column).to_numpy(zero_copy_only=False)
    return (
        np.asarray([np.nan if v is None else v for v in arr], dtype=np.float64)
        if arr.dtype == object
        else arr.astype(np.float64)
    )


def scored(table: pa.Table) -> pa.Table:
    """Only the prompts with at least one score (``n_scored > 0``): the rows the means run over."""
    mask = pa.array(values(table, "n_scored") > 0)
    return table.filter(mask)
