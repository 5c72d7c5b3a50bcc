"""Helpers shared by subcommands: printing metric tables, JSON output, progress bars."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from .._util.numfmt import fmt_num as fmt  # the one formatter; ``fmt`` for the subcommands that import it
from ..errors import PolytoxError


class _Console(Console):
    """rich's console, but a closed stdout raises ``BrokenPipeError`` up to ``main``, which stops every
    subcommand the same quiet way (rich's own handler exits 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


console = _Console(stderr=True, soft_wrap=True)  # messages are not hard-wrapped: keep file:line greppable
out_console = _Console(width=None if sys.stdout.isatty() else 160)


def _ci(block: dict[str, Any], key: str) -> str:
    ci = block.get(f"{key}_ci")
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"


def metrics_table(metrics: dict[str, Any], title: str = "polytox metrics") -> Table:
    """Overall row plus one row per split value."""
    settings = metrics.get("settings", {})
    caption = (
        f"toxic = score {settings.get('comparison', '>=')} {settings.get('threshold', 0.5)}; "
        f"{int(settings.get('ci_level', 0.95) * 100)}% bootstrap CI over prompts "
        f"({settings.get('n_bootstrap', '?')} resamples)"
    )
    if metrics.get("scale"):
        caption += f"; scale: {metrics['scale']}"
    if metrics.get("attribute"):
        caption += f"; attribute: {metrics['attribute']}"
    table = Table(title=title, caption=caption)
    for col in ("group", "prompts", "gens", "missing", "EMT ± std", "EMT CI", "EP", "EP CI", "AT ± std"):
        table.add_column(col, justify="left" if col == "group" else "right")

    def row(name: str, b: dict[str, Any]) -> None:
        table.add_row(
            name,
            fmt(b["n_prompts"]),
            fmt(b["n_generations"]),
            fmt(b["n_missing_scores"]),
            f"{fmt(b['emt'])} ± {fmt(b['emt_std'])}",
            _ci(b, "emt"),
            fmt(b["ep"]),
            _ci(b, "ep"),
            f"{fmt(b['at'])} ± {fmt(b['at_std'])}",
        )

    row("overall", metrics["overall"])
    for split, groups in metrics.get("by", {}).items():
        if len(groups) <= 1 and split != "prompt_toxicity":
            continue
        for value, block in groups.items():
            row(f"{split}={value}", block)
    return table


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar; yields a ``callback(stage, done, total)``.

    The bar is drawn at the first callback, not on entry: the command validates its input (prompt files,
    scorer options, the model) first, and an error found there prints alone, without an empty bar above it.
    """
    if not enabled:
        yield lambda stage, done, total: None
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    task = bar.add_task(description, total=None)
    started = False

    def callback(stage: str, done: int, total: int) -> None:
        nonlocal started
        if not started:
            bar.start()
            started = True
        bar.update(task, completed=done, total=total, description=stage)

    try:
        yield callback
    finally:
        if started:
            bar.stop()


DATA_ENV = "POLYTOX_DATA"  # the project's data folder when a command's --data / --shared is not given
CHECKOUT_DATA = Path("..") / "shared" / "data"  # the project's data folder, beside a checkout's working folder


def data_folder(given: str | None, needed_for: str) -> Path:
    """The data folder a command reads: the flag's value, $POLYTOX_DATA, or the project's data folder when
    polytox runs from a checkout; otherwise one error line saying what to give (``needed_for``)."""
    folder = given or os.environ.get(DATA_ENV)
    if folder:
        return Path(folder)
    if CHECKOUT_DATA.is_dir():
        return CHECKOUT_DATA
    raise PolytoxError(needed_for)
