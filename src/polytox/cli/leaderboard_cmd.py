"""The ``polytox leaderboard`` subcommand: argument parsing and output; the table is computed by
``polytox.analysis.leaderboard`` (DuckDB over the runs' Parquet files).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.text import Text

from .._util.atomic import atomic_write_text
from .analysis_args import add_common, load_corpus
from .common import console, out_console

DESCRIPTION = """\
One row per model with AT, EMT and EP (± std) overall, per language, per resource tier and per prompt
toxicity, from the given run directories. Model metadata comes from the runs' manifests or --meta YAML.
--csv, --markdown and --json save the table.

example:
  polytox leaderboard runs/* --markdown leaderboard.md
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "leaderboard",
        help="compare models across runs: AT/EMT/EP per language and tier",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p, listings=False)
    p.add_argument("--csv", metavar="PATH", help="write the leaderboard as CSV (one wide row per model)")
    p.add_argument("--markdown", metavar="PATH", help="write the leaderboard tables as Markdown")
    p.add_argument("--json", metavar="PATH", help="write the leaderboard as JSON ('-' for stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.leaderboard import build_leaderboard
    from ..report.markdown import notes_markdown, table_markdown
    from ..report.terminal import rich_table

    corpus, opts = load_corpus(args)
    board = build_leaderboard(corpus, opts)
    if args.json == "-":
        out_console.file.write(json.dumps(board.to_dict(), indent=2, default=str) + "\n")
    else:
        tables = board.tables()
        show = {"leaderboard", "by_lang_at", "by_tier_at", "by_prompt_toxicity"}
        if len(board.langs) <= 1:
            show -= {"by_lang_at"}
        for t in tables:
            if t.name in show:
                out_console.print(rich_table(t))
        for note in board.notes:
            console.print(Text(f"note: {note}", style="yellow"))
    if args.csv:
        atomic_write_text(Path(args.csv), board.to_csv())
        console.print(Text(f"wrote {args.csv}"))
    if args.markdown:
        text = "\n".join(table_markdown(t) for t in board.document_tables())
        if board.notes:
            text += "\nNotes:\n\n" + notes_markdown(board.notes)
        atomic_write_text(Path(args.markdown), text)
        console.print(Text(f"wrote {args.markdown}"))
    if args.json and args.json != "-":
        atomic_write_text(Path(args.json), json.dumps(board.to_dict(), indent=2, default=str) + "\n")
        console.print(Text(f"wrote {args.json}"))
    return 0
