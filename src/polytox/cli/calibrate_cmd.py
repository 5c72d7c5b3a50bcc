"""The ``polytox calibrate`` subcommand: reads the paired scores, calls ``polytox.scoring.calibrate`` to
fit and measure the map, prints the held-out table and writes the map file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from ..spec import parse_options
from .common import console, fmt, out_console, print_json, progress_bar
from .flags import SCORED_ATTRIBUTE, add, add_comparison, add_seed, add_threshold
from .score_cmd import add_input_args, read_rows

DESCRIPTION = """\
Map scorer A's scale onto reference B with a monotone (isotonic) map.

One map per language with enough pairs (--min-per-lang) and a global one for the rest, fitted on a
training part of --input; MAE, AUC, Pearson r and the toxic rate before and after are reported on the
held-out part (--holdout, split by --group-field so related rows stay together). B is a scorer name or
@COLUMN of scores stored in the input (e.g. @toxicity: RTP's Perspective values). Apply the map to any
later run with --scorer-opt calibration=MAP.json.

example:
  polytox calibrate svm @toxicity --input prompts.jsonl --out svm-map.json
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit an isotonic map from a local scorer onto a reference scorer",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="the scorer to calibrate (registered name)")
    p.add_argument("b", metavar="B", help="the reference: scorer name, or @COLUMN (e.g. @toxicity)")
    p.add_argument("--input", required=True, help="JSONL, CSV or Parquet of texts")
    p.add_argument("--out", required=True, help="calibration file to write (.json)")
    p.add_argument("--a-opt", action="append", metavar="KEY=VALUE", help="option of scorer A (repeatable)")
    p.add_argument("--b-opt", action="append", metavar="KEY=VALUE", help="option of scorer B (repeatable)")
    add(p, SCORED_ATTRIBUTE)
    p.add_argument("--holdout", type=float, default=0.2, help="share of groups held out for the report")
    p.add_argument("--group-field", metavar="PATH", help="dotted path grouping rows for the split (default: id)")
    p.add_argument("--min-per-lang", type=int, default=200, help="pairs a language needs for its own map")
    add_seed(p)
    add_threshold(p)
    add_comparison(p)
    p.add_argument("--json", action="store_true", help="print the held-out report as JSON")
    p.add_argument("--no-progress", action="store_true")
    add_input_args(p)
    p.set_defaults(func=run)


def print_heldout(report: dict[str, Any], title: str) -> None:
    table = Table(
        title=title,
        caption=f"held out: {report['n_heldout']} pairs (of {report['n_pairs']}; "
        f"{report['n_missing']} rows missing a score)",
    )
    for col in (
        "group",
        "map",
        "n",
        "MAE before",
        "MAE after",
        "AUC before",
        "AUC after",
        "r before",
        "r after",
        "toxic before",
        "toxic after",
        "toxic ref",
    ):
        table.add_column(col, justify="left" if col in ("group", "map") else "right")

    def row(name: str, block: dict[str, Any], kind: str) -> None:
        b, a = block["before"], block["after"]
        table.add_row(
            name,
            kind,
            fmt(b.get("n")),
            fmt(b.get("mae")),
            fmt(a.get("mae")),
            fmt(b.get("auc")),
            fmt(a.get("auc")),
            fmt(b.get("pearson")),
            fmt(a.get("pearson")),
            fmt(b.get("toxic_rate")),
            fmt(a.get("toxic_rate")),
            fmt(b.get("toxic_rate_reference")),
        )

    held = report["heldout"]
    row("overall", held["overall"], "")
    for lang, block in held["by_lang"].items():
        row(f"lang={lang}", block, block["map"])
    out_console.print(table)


def run(args: argparse.Namespace) -> int:
    from ..scoring.calibrate import calibrate
    from ..scoring.sources import is_reference, side_values
    from ..scoring.textio import dig

    if is_reference(args.a):
        from ..errors import PolytoxError

        raise PolytoxError("A must be a scorer (the one the map will be applied to), not a column")
    rows = read_rows(args)
    with progress_bar("score A", enabled=not args.no_progress) as callback:
        a = side_values(args.a, parse_options(args.a_opt or []), rows, args.attribute, callback)
    with progress_bar("score B", enabled=not args.no_progress) as callback:
        b = side_values(args.b, parse_options(args.b_opt or []), rows, args.attribute, callback)
    groups = []
    for r in rows:
        group = dig(r.record, args.group_field) if args.group_field and r.record is not None else None
        groups.append(str(group) if group is not None else str(r.id if r.id is not None else r.position))
    cal = calibrate(
        a.values,
        b.values,
        [r.lang for r in rows],
        groups,
        scorer=a.label,
        reference=b.label,
        attribute=args.attribute,
        holdout=args.holdout,
        seed=args.seed,
        min_per_lang=args.min_per_lang,
        threshold=args.threshold,
        comparison=args.comparison,
    )
    cal.save(Path(args.out))
    if args.json:
        print_json(cal.to_json()["report"])
    else:
        print_heldout(dict(cal.report), f"calibration of {a.label} onto {b.label}")
        langs = ", ".join(sorted(cal.per_lang)) or "none (global map only)"
        console.print(
            f"wrote {args.out}: global map ({len(cal.global_map.x)} breakpoints) + own maps for: "
            f"{langs}. Apply with --scorer-opt calibration={args.out}"
        )
    return 0
