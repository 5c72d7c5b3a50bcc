"""How a table cell is written, the same in every renderer: missing is "–", never 0."""

from __future__ import annotations

from ..analysis.result import Cell

MISSING = "–"


def format_cell(value: Cell, column: str = "") -> str:
    """Text of one cell: floats to 3 decimals; non-zero values below 0.001 (p-values, mostly) in
    scientific notation, so a tiny p never reads as 0.000."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.1e}"
        return f"{value:.3f}"
    return str(value)
