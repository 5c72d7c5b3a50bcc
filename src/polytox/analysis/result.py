"""What every analysis returns: named tables of plain values, notes, and the data its plot needs.

Analyses never format or render; the terminal, Markdown, JSON and HTML renderers all read this one
structure, so the report shows exactly what ``polytox analyze`` prints. A missing value is ``None`` in
a cell (rendered as "–"), never 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Cell = str | int | float | bool | None


def clean(value: Any) -> Cell:
    """A JSON-safe cell: NaN/inf become None (missing), numpy scalars become Python numbers."""
    if value is None or isinstance(value, bool | str | int):
        return value  # type: ignore[no-any-return]
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int | bool | str):
        return value
    return str(value)


@dataclass(frozen=True)
class Table:
    """A titled table: ``columns`` names, ``rows`` of cells (model-written strings are left raw here and
    escaped by each renderer)."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""

    @classmethod
    def build(
        cls, name: str, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = ""
    ) -> Table:
        cols = tuple(columns)
        out = []
        for row in rows:
            if len(row) != len(cols):
                raise ValueError(f"table {name}: row has {len(row)} cells for {len(cols)} columns")
            out.append(tuple(clean(v) for v in row))
        return cls(name=name, title=title, columns=cols, rows=tuple(out), caption=caption)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "caption": self.caption,
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
        }

    def records(self) -> list[dict[str, Cell]]:
        """Rows as ``{column: value}`` dicts (for tests and JSON consumers)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass
class AnalysisResult:
    """One research question answered over a set of runs.

    ``key`` names the analysis (and its plot function), ``reference`` the paper section it mirrors,
    ``notes`` what a reader must know (small samples, missing data, runs left out), ``data`` the
    plain numbers the plot draws.
    """

    key: str
    title: str
    reference: str
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"{self.key} has no table {name!r}; it has {[t.name for t in self.tables]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "reference": self.reference,
            "notes": list(self.notes),
            "tables": [t.to_dict() for t in self.tables],
        }


def pm(mean: float | None, std: float | None, digits: int = 3) -> str | None:
    """``mean ± std`` for a cell; the std is left out when undefined (n < 2), the cell is None when the
    mean is."""
    if mean is None:
        return None
    if std is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"
