"""The one number formatter of polytox's tables: a real number with 3 decimals (RTP/PTP report metrics to
three digits), a count or a name as it is, and a chosen mark for a missing value; shares as percentages,
with their confidence interval."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, overload


@overload
def fmt_num(
    value: Any, digits: int = 3, *, signed: bool = False, percent: bool = False, nan: str | None = None
) -> str: ...
@overload
def fmt_num(
    value: Any, digits: int = 3, *, missing: str, signed: bool = False, percent: bool = False, nan: str | None = None
) -> str: ...
@overload
def fmt_num(
    value: Any, digits: int = 3, *, missing: None, signed: bool = False, percent: bool = False, nan: str | None = None
) -> str | None: ...


def fmt_num(
    value: Any,
    digits: int = 3,
    *,
    missing: str | None = "-",
    signed: bool = False,
    percent: bool = False,
    nan: str | None = None,
) -> str | None:
    """``value`` as a table cell.

    Args:
        value: a metric, a count, a name, or None.
        digits: decimals of a real number.
        missing: what None becomes: ``"-"`` in terminal tables, None where the table marks missing cells
            itself (``analysis.result.Table``).
        signed: write the sign of a real number always (``+0.008``), for differences.
        percent: a real number is a share, written as a percentage (``12.5%``).
        nan: what NaN becomes; None writes it as a number (``nan``).

    Returns:
        ``f"{value:.{digits}f}"`` for a real number that is not an integer type (NumPy floats included), the
        text of any other value, ``missing`` for None.
    """
    if value is None:
        return missing
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        if nan is not None and math.isnan(value):
            return nan
        sign = "+" if signed else ""
        return f"{100 * value:{sign}.{digits}f}%" if percent else f"{value:{sign}.{digits}f}"
    return str(value)


def fmt_share(share: float | None, ci: Sequence[float] | None = None, digits: int = 2) -> str:
    """A share in [0, 1] as a percentage with its confidence interval in points, ``12.50% [10.20, 14.90]``
    (no interval when ``ci`` is empty); ``-`` when the share is missing."""
    if share is None:
        return "-"
    span = f" [{100 * ci[0]:.{digits}f}, {100 * ci[1]:.{digits}f}]" if ci else ""
    return f"{100 * share:.{digits}f}%{span}"
