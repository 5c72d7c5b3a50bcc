"""The ``polytox analyze`` subcommand: argument parsing and output only; each question's tables and plot
are computed by ``polytox.analysis`` (``ANALYSES``) and rendered by ``polytox.report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.text import Text

from .._util.atomic import atomic_write, atomic_write_text
from ..analysis import ANALYSES
from .analysis_args import add_common, load_corpus
from .common import console, out_console

DESCRIPTION = """\
Answer one of the papers' research questions over your runs: print its tables and save its plot.

QUESTION is one of the questions listed below, or all. --plot-dir sets where plots go (--no-plot skips
them); --json and --markdown save the tables.

example:
  polytox analyze language runs/llama runs/qwen --plot-dir plots/
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    epilog = "\n".join(f"  {name:16} {desc}" for name, (_, desc) in ANALYSES.items())
    p = sub.add_parser(
        "analyze",
        help="research-question analyses: language, size, category, ... (tables + plots)",
        description=DESCRIPTION,
        epilog="questions:\n" + epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "question", choices=[*ANALYSES, "all"], metavar="QUESTION", help=f"one of: {', '.join(ANALYSES)}, all"
    )
    add_common(p)
    p.add_argument("--scorer-b", help="second stored scorer for 'scorers' (e.g. a safety judge)")
    p.add_argument("--attribute-b", default="toxicity", help="attribute of --scorer-b (default: toxicity)")
    p.add_argument("--k", type=int, action="append", help="K values for 'emt-k' (repeatable; default 1..K)")
    p.add_argument("--plot-dir", default="polytox-plots", help="where plots are saved (default: polytox-plots/)")
    p.add_argument("--no-plot", action="store_true", help="do not draw plots")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON ('-' for stdout, no tables then)")
    p.add_argument("--markdown", metavar="PATH", help="write the results as Markdown")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis import run_analysis
    from ..report.markdown import result_markdown
    from ..report.terminal import print_result

    corpus, opts = load_corpus(args, scorer_b=args.scorer_b, attribute_b=args.attribute_b, ks=tuple(args.k or ()))
    names = list(ANALYSES) if args.question == "all" else [args.question]
    if args.question == "all" and not args.scorer_b:
        names.remove("scorers")
        console.print("note: 'scorers' skipped (it needs --scorer and --scorer-b)")
    results = []
    markdown = []
    for name in names:
        result = run_analysis(name, corpus, opts)
        results.append(result)
        if args.json != "-":
            print_result(result, out_console, console)
        image = None
        if not args.no_plot:
            from ..report.plots import plot_png

            png = plot_png(result)
            if png:
                path = Path(args.plot_dir) / f"{name}.png"
                _write_bytes(path, png)
                console.print(Text(f"plot: {path}"))
                image = str(path)
        markdown.append(result_markdown(result, image))
    if args.json:
        text = json.dumps([r.to_dict() for r in results], indent=2, default=str) + "\n"
        if args.json == "-":
            out_console.file.write(text)
        else:
            atomic_write_text(Path(args.json), text)
    if args.markdown:
        atomic_write_text(Path(args.markdown), "\n".join(markdown))
    return 0


def _write_bytes(path: Path, data: bytes) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    atomic_write(path, write)
