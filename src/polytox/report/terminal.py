"""Analysis tables on the terminal with rich. Cells are ``rich.text.Text``, so a model-written string such as
``[bold]`` is printed as written, never interpreted as markup."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from ..analysis.result import AnalysisResult, Table
from .cells import format_cell

TEXT_COLUMNS = frozenset({"prompt", "continuation"})
MAX_TEXT = 80


def rich_table(table: Table) -> RichTable:
    out = RichTable(title=Text(table.title), caption=Text(table.caption) if table.caption else None)
    for col in table.columns:
        numeric = any(isinstance(r[table.columns.index(col)], int | float) for r in table.rows)
        out.add_column(
            Text(col),
            justify="right" if numeric else "left",
            overflow="fold" if col in TEXT_COLUMNS else "ellipsis",
        )
    for row in table.rows:
        cells = []
        for col, value in zip(table.columns, row, strict=True):
            text = format_cell(value, col)
            if col in TEXT_COLUMNS and len(text) > MAX_TEXT:
                text = text[: MAX_TEXT - 1] + "…"
            cells.append(Text(text))
        out.add_row(*cells)
    return out


def print_result(result: AnalysisResult, console: Console, notes_console: Console | None = None) -> None:
    """Tables to ``console`` (stdout), notes to ``notes_console`` (stderr) when given."""
    console.print(Text(f"{result.title}  ({result.reference})", style="bold"))
    for table in result.tables:
        if table.rows:
            console.print(rich_table(table))
        else:
            console.print(Text(f"{table.title}: no rows"))
    target = notes_console or console
    for note in result.notes:
        target.print(Text(f"note: {note}", style="yellow"))
