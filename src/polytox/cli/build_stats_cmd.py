"""The ``polytox build stats`` step: argument parsing and file output; the statistics are computed by
``polytox.build.stats`` and rendered by ``polytox.build.stats_render``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import console, out_console, print_json
from .flags import add_threshold

DESCRIPTION = """\
Per-language statistics of a built prompt set (or of any PTP/RTP-style file).

Counts by toxicity bin, toxicity histograms (--log for log-scale counts), prompt length in GPT-4 tokens,
document years, top-10 domains, share of toxic prompts and continuations, exact and near-duplicate counts.
Markdown (or --format json) on stdout; stats.json, stats.md and PNG figures written to --out (default:
PATH/stats for a build directory).

example:
  polytox build stats myset/
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stats",
        help="statistics of a built prompt set",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="build directory, or a PTP/RTP-schema .jsonl/.parquet file")
    p.add_argument("--out", dest="stats_out", help="where to write stats.json, stats.md and PNGs")
    p.add_argument("--format", choices=["md", "json"], default="md", help="what to print on stdout")
    p.add_argument("--log", action="store_true", help="log-scale counts in the toxicity histograms")
    add_threshold(p)
    p.add_argument("--no-dedup", action="store_true", help="skip the exact/near-duplicate counts")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._util.atomic import atomic_write_json, atomic_write_text
    from ..promptset.stats import compute_stats
    from ..promptset.stats_render import render_stats_markdown, render_stats_plots

    path = Path(args.path)
    stats = compute_stats(path, threshold=args.threshold, dedup=not args.no_dedup)
    folder = (
        Path(args.stats_out)
        if args.stats_out
        else (path / "stats" if path.is_dir() else path.with_name(path.stem + "-stats"))
    )
    markdown = render_stats_markdown(stats)
    atomic_write_json(folder / "stats.json", stats)
    atomic_write_text(folder / "stats.md", markdown)
    written = [] if args.no_plots else render_stats_plots(stats, folder, log=args.log)
    if args.format == "json":
        print_json(stats)
    else:
        out_console.print(markdown, markup=False)
    console.print(
        f"wrote {folder / 'stats.json'}, {folder / 'stats.md'}"
        + (", " + ", ".join(p.name for p in written) if written else "")
    )
    return 0
