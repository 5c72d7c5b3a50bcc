"""The one number formatter of polytox's tables: a real number with 3 decimals (RTP/PTP report metrics to
three digits), a count or a name as it is, and a chosen mark for a missing value."""

from __future__ import annotations

import numbers
from typing import Any, overload


@overload
def fmt_num(value: Any, digits: int = 3) -> str: ...
@overload
def fmt_num(value: Any, digits: int = 3, *, missing: str) -> str: ...
@overload
def fmt_num(value: Any, digits: int = 3, *, missing: None) -> str | None: ...


def fmt_num(value: Any, digits: int = 3, *, missing: str | None = "-") -> str | None:
    """``value`` as a table cell.

    Args:
        value: a metric, a count, a name, or None.
        digits: decimals of a real number.
        missing: what None becomes: ``"-"`` in terminal tables, None where the table marks missing cells
            itself (``analysis.result.Table``).

    Returns:
        ``f"{value:.{digits}f}"`` for a real number that is not an integer type (NumPy floats included), the
        text of any other value, ``missing`` for None.
    """
    if value is None:
        return missing
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{value:.{digits}f}"
    return str(value)
