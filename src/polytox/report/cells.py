"""How a table cell is written, the same in every renderer: missing is "–", never 0."""

from __future__ import annotations

from ..analysis.result import Cell

MISSING = "–"
P_COLUMNS = frozenset({"p"})


def format_cell(value: Cell, column: str = "") -> str:
    """Text of one cell: floats to 3 decimals (p-values below 0.001 in scientific notation)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if column in P_COLUMNS and value < 1e-3:
            return f"{value:.1e}"
        return f"{value:.3f}"
    return str(value)
