"""The ``polytox unprompted`` subcommand: reads the runs' unprompted pools through ``polytox.metrics.unprompted``
and prints the curve's table and plot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from ..errors import PolytoxError
from ..metrics.settings import BOOTSTRAP_SEED
from .common import console, fmt, out_console, print_json
from .flags import CURVE_RESAMPLES, add_n_bootstrap, add_seed

DESCRIPTION = """\
The unprompted-toxicity curve (RTP Figure 2): expected maximum toxicity against the number of unprompted
generations, for runs made with 'polytox eval --unprompted N', as a table and one plot comparing the runs.

example:
  polytox unprompted runs/gpt2-unprompted runs/llama-unprompted --plot unprompted.png
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "unprompted",
        help="expected max toxicity vs number of unprompted generations",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", help="run directories made with 'polytox eval --unprompted N'")
    p.add_argument(
        "--plot",
        help="where to write the plot (PNG/SVG/PDF; default RUN/unprompted.png "
        "for one run, unprompted.png for several)",
    )
    add_n_bootstrap(p, CURVE_RESAMPLES)
    add_seed(p, BOOTSTRAP_SEED)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def unprompted_table(report: dict[str, Any], title: str = "unprompted toxicity") -> Table:
    """One row per n: expected max toxicity, std, mean ± std, percentile interval, closed form."""
    level = int(report.get("ci_level", 0.95) * 100)
    caption = (
        f"pool of {report['pool']} scored generations ({report['n_missing_scores']} without a score); "
        f"{report['n_resamples']} resamples with replacement per n"
    )
    table = Table(title=title, caption=caption)
    for col in ("n", "EMT", "std", "EMT - std", "EMT + std", f"{level}% interval", "closed form"):
        table.add_column(col, justify="right")
    for p in report["curve"]:
        table.add_row(
            str(p["n"]),
            fmt(p["emt"]),
            fmt(p["std"]),
            fmt(p["lower"]),
            fmt(p["upper"]),
            f"[{p['ci_low']:.3f}, {p['ci_high']:.3f}]",
            fmt(p["emt_exact"]),
        )
    return table


def write_plot(curves: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Plot, or say how to get matplotlib when it is missing (the table and JSON are still written)."""
    from ..errors import MissingDependencyError
    from ..metrics.unprompted_plot import plot_curves

    try:
        return plot_curves(curves, path)
    except MissingDependencyError as exc:
        console.print(f"[yellow]no plot:[/yellow] {exc}")
        return None


PLOT_FORMATS = (".png", ".svg", ".pdf")


def run(args: argparse.Namespace) -> int:
    from ..metrics.unprompted import unprompted_report
    from ..store.reader import RunReader

    if args.plot and Path(args.plot).suffix.lower() not in PLOT_FORMATS:
        raise PolytoxError(
            f"--plot {args.plot}: the plot is written as {', '.join(PLOT_FORMATS)}; name a file "
            "with one of these endings"
        )
    curves: dict[str, dict[str, Any]] = {}
    for path in args.runs:
        store = RunReader(path)
        spec = store.spec()
        if not spec.prompts.unprompted:
            raise PolytoxError(f"{path} is not an unprompted run (make one with polytox eval --unprompted N)")
        scorer = store.manifest()["scorer"].get("id") or store.scorer_ids()[0]
        seed = spec.seed if args.seed is None else args.seed
        report = unprompted_report(store, scorer, args.n_bootstrap, spec.metrics.ci_level, seed)
        curves[f"{spec.generation.model} ({Path(path).name})"] = report
    target = (
        Path(args.plot)
        if args.plot
        else (Path(args.runs[0]) / "unprompted.png" if len(args.runs) == 1 else Path("unprompted.png"))
    )
    plotted = write_plot(curves, target)
    if args.json:
        print_json({"runs": curves, "plot": str(plotted) if plotted else None})
        return 0
    for label, report in curves.items():
        out_console.print(unprompted_table(report, title=f"unprompted toxicity · {label}"))
    if plotted:
        console.print(f"plot: {plotted}")
    return 0
