"""The ``polytox report`` subcommand: argument parsing and file output; the content is assembled by
``polytox.report.build`` and rendered to HTML, Markdown and JSON by ``polytox.report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.text import Text

from .._util.atomic import atomic_write_text
from ..analysis import ANALYSES
from ..errors import PolytoxError
from .analysis_args import add_common, load_corpus
from .common import console

DESCRIPTION = """\
One self-contained HTML file (opens offline) over run directories: the leaderboard, every analysis with
its plot, per-run details with manifests, and the most and least toxic continuations per model.
--markdown / --json export the same content; --analyses picks the analyses.

example:
  polytox report runs/* --out report.html
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="self-contained HTML report (+ Markdown / JSON) over run directories",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(p)
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--markdown", metavar="PATH", help="also write Markdown (plots go to PATH-stem_files/)")
    p.add_argument("--json", metavar="PATH", help="also write the content as JSON")
    p.add_argument(
        "--compare-scorers",
        nargs=2,
        metavar=("A", "B"),
        help="the two stored scorers of the agreement section (default: the first run storing two)",
    )
    p.add_argument("--analyses", help=f"comma list of analyses to include (default: all of {', '.join(ANALYSES)})")
    p.add_argument("--title", default="polytox report")
    p.add_argument("--no-plots", action="store_true", help="leave plots out (no matplotlib needed)")
    p.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="SCORES",
        help="add the statistics of a scored pretraining corpus ('polytox corpus score' output)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..report.build import build_report
    from ..report.html import render_html
    from ..report.jsonexport import report_dict
    from ..report.markdown import render_markdown

    names = [n.strip() for n in args.analyses.split(",") if n.strip()] if args.analyses else None
    unknown = [n for n in names or [] if n not in ANALYSES]
    if unknown:
        raise PolytoxError(f"unknown analysis {', '.join(unknown)}; known: {', '.join(ANALYSES)}")
    corpus, opts = load_corpus(args)
    report = build_report(
        corpus,
        opts,
        analyses=names,
        compare=tuple(args.compare_scorers) if args.compare_scorers else None,  # type: ignore[arg-type]
        plots=not args.no_plots,
        title=args.title,
    )
    if args.corpus:
        from ..report.corpus_section import build_corpus_sections

        report.corpus = build_corpus_sections(args.corpus, plots=not args.no_plots)
    out = Path(args.out)
    atomic_write_text(out, render_html(report))
    console.print(Text(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB, {len(report.runs)} runs)"))
    if args.markdown:
        md = Path(args.markdown)
        atomic_write_text(md, render_markdown(report, md))
        console.print(Text(f"wrote {md}"))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps(report_dict(report), indent=2, default=str) + "\n")
        console.print(Text(f"wrote {args.json}"))
    for sec in report.sections:
        if sec.error:
            console.print(Text(f"note: {sec.name}: {sec.error}", style="yellow"))
    return 0
