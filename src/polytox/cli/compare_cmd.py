"""The ``polytox compare-scorers`` subcommand: reads both sides' scores through ``polytox.scoring.sources``,
measures their agreement with ``polytox.scoring.agreement`` and prints or saves the report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from .._util.atomic import atomic_write_text
from ..spec import parse_options
from .common import console, fmt, out_console, print_json, progress_bar
from .flags import SCORED_ATTRIBUTE, add, add_comparison, add_threshold
from .score_cmd import add_input_args, read_rows

DESCRIPTION = """\
How well scorer A agrees with reference B (a scorer, or scores stored in the input).

A and B are registered scorer names (options with --a-opt / --b-opt KEY=VALUE) or @COLUMN for scores stored
next to each text: on RealToxicityPrompts records @toxicity is Perspective's TOXICITY. @COL[1:5] maps a
1-5 rating onto [0, 1]. Printed: Pearson, Spearman, AUC against B's toxic label (B >= --threshold), MAE,
the confusion matrix, the --top disagreements in both directions with their texts, and a breakdown by
language (--report also writes it as JSON). Rows where either side has no score are counted and left out.

example:
  polytox compare-scorers default @toxicity --input prompts.jsonl --report agreement.json
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare-scorers",
        help="agreement of two scorers (or a scorer and stored scores)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="scorer name, or @COLUMN of stored scores")
    p.add_argument("b", metavar="B", help="the reference: scorer name, or @COLUMN (e.g. @toxicity)")
    p.add_argument("--input", required=True, help="JSONL, CSV or Parquet of texts")
    p.add_argument("--a-opt", action="append", metavar="KEY=VALUE", help="option of scorer A (repeatable)")
    p.add_argument("--b-opt", action="append", metavar="KEY=VALUE", help="option of scorer B (repeatable)")
    add(p, SCORED_ATTRIBUTE)
    add_threshold(p)
    add_comparison(p)
    p.add_argument("--top", type=int, default=10, help="disagreements listed in each direction")
    p.add_argument("--min-per-lang", type=int, default=10, help="smallest language reported on its own")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--report", help="also write the JSON report to this file")
    p.add_argument("--no-progress", action="store_true")
    add_input_args(p)
    p.set_defaults(func=run)


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    from ..scoring.agreement import compare
    from ..scoring.sources import check_side, side_values

    for side, opts in ((args.a, args.a_opt), (args.b, args.b_opt)):  # both, before either scores
        check_side(side, parse_options(opts or []))
    rows = read_rows(args)
    with progress_bar("score A", enabled=not args.no_progress) as callback:
        a = side_values(args.a, parse_options(args.a_opt or []), rows, args.attribute, callback)
    with progress_bar("score B", enabled=not args.no_progress) as callback:
        b = side_values(args.b, parse_options(args.b_opt or []), rows, args.attribute, callback)
    report = compare(
        a.values, b.values, [r.lang for r in rows], args.threshold, args.comparison, args.top, args.min_per_lang
    )
    report = {"a": a.label, "b": b.label, "input": str(args.input), "attribute": args.attribute, **report}

    def item(i: int) -> dict[str, Any]:
        r = rows[i]
        return {"id": r.id, "part": r.part, "lang": r.lang, "a": a.values[i], "b": b.values[i], "text": r.text}

    report["disagreements"] = {k: [item(i) for i in v] for k, v in report["disagreements"].items()}
    report["missing_examples"] = {
        "a": sorted({e.split(":", 1)[0] for e in a.errors if e})[:10],
        "b": sorted({e.split(":", 1)[0] for e in b.errors if e})[:10],
    }
    # input rows that could not be read (malformed line, missing field): FILE:LINE and why, not only a count
    report["bad_rows"] = [r.error for r in rows if r.error and r.error.startswith(("BAD_INPUT", "INVALID_UTF8"))]
    return report


def _short(text: str | None, width: int = 110) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def print_report(report: dict[str, Any]) -> None:
    a, b = report["a"], report["b"]
    cmp = f"{report['comparison']} {report['threshold']}"
    table = Table(
        title=f"{a} vs {b} (reference) · toxic = score {cmp}",
        caption=f"{report['n_rows']} rows; missing: A {report['n_missing_a']}, B {report['n_missing_b']}",
    )
    for col in ("group", "n", "Pearson r", "Spearman ρ", "AUC", "MAE", "accuracy", "κ", "toxic A", "toxic B"):
        table.add_column(col, justify="left" if col == "group" else "right")

    def row(name: str, s: dict[str, Any]) -> None:
        c = s.get("confusion") or {}
        table.add_row(
            name,
            fmt(s.get("n")),
            fmt(s.get("pearson")),
            fmt(s.get("spearman")),
            fmt(s.get("auc")),
            fmt(s.get("mae")),
            fmt(c.get("accuracy")),
            fmt(c.get("cohen_kappa")),
            fmt(c.get("toxic_rate_a")),
            fmt(c.get("toxic_rate_b")),
        )

    row("overall", report["overall"])
    for lang, s in report["by_lang"].items():
        row(f"lang={lang}", s)
    out_console.print(table)

    c = report["overall"]["confusion"]
    matrix = Table(title=f"confusion at {cmp}")
    for col in ("", f"B toxic ({b})", "B non-toxic"):
        matrix.add_column(col, justify="right")
    matrix.add_row(f"A toxic ({a})", str(c["tp"]), str(c["fp"]))
    matrix.add_row("A non-toxic", str(c["fn"]), str(c["tn"]))
    out_console.print(matrix)

    for key, title in (("a_high_b_low", f"A high, B low ({a} > {b})"), ("a_low_b_high", "A low, B high")):
        items = report["disagreements"][key]
        t = Table(title=f"top {len(items)} disagreements: {title}")
        for col in ("id", "lang", "A", "B", "text"):
            t.add_column(col, justify="right" if col in ("A", "B") else "left", overflow="fold")
        for it in items:
            t.add_row(
                str(it["id"]) + (f" ({it['part']})" if it.get("part") else ""),
                str(it["lang"]),
                fmt(it["a"]),
                fmt(it["b"]),
                _short(it["text"]),
            )
        out_console.print(t)


def run(args: argparse.Namespace) -> int:
    report = build_report(args)
    if args.report:
        text = json.dumps(report, indent=1, ensure_ascii=False, default=str)
        atomic_write_text(Path(args.report), text + "\n")
    if args.json:
        print_json(report)
    else:
        print_report(report)
        if args.report:
            console.print(f"report written to {args.report}")
    if report["bad_rows"]:
        console.print(
            f"[yellow]{len(report['bad_rows'])} input row(s) could not be read (counted as missing):[/yellow]"
        )
        for line in report["bad_rows"][:20]:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    return 0
