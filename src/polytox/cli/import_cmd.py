"""The ``polytox import`` subcommand: argument parsing and the side-by-side table; reading each framework's
output and writing the run directory is ``polytox.integrations.importing``'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import console, metrics_table, out_console, print_json
from .flags import IMPORT_SCORER, add_scorer_flags

DESCRIPTION = """\
Turn an inspect_ai log, a HELM run folder or lm-eval --log_samples output into a polytox run directory.

The framework's prompts and completions become the run's prompts and generations; the values its polytox
scorer recorded are stored under that scorer's id, so 'polytox metrics RUN' gives the numbers the framework
printed (shown side by side here). --scorer scores the completions here as well (HELM keeps no
per-completion values: its completions are scored with the scorer its run recorded unless --scorer names
another). Nothing is generated again. The run then works with metrics, leaderboard, report and
compare-scorers.

example:
  polytox import logs/2026-01-01_rtp.eval --out runs/inspect-rtp
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="a framework's run (inspect_ai, HELM, lm-eval) as a polytox run directory",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="SRC", help="inspect .eval/.json log, HELM run folder, or lm-eval samples output")
    p.add_argument("--out", required=True, help="the new run directory")
    p.add_argument("--framework", choices=["inspect", "helm", "lm-eval"], help="default: recognised from SRC")
    add_scorer_flags(p, IMPORT_SCORER)
    p.add_argument("--json", action="store_true", help="print the run's metrics as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import PolytoxError
    from ..integrations.importing import check_out, read_source, recorded_scorer, store_run
    from ..spec import parse_options

    if args.scorer_opt and not args.scorer:
        raise PolytoxError("--scorer-opt needs --scorer")
    check_out(Path(args.out), args.source)  # before reading: a target that is not new is refused at once
    imported = read_source(args.source, args.framework)
    rescore = (
        (args.scorer, {k: str(v) for k, v in parse_options(args.scorer_opt or []).items()}) if args.scorer else None
    )
    if rescore is None and not imported.has_values:
        rescore = recorded_scorer(imported)  # HELM: score again with the scorer its run recorded
    result = store_run(imported, args.out, rescore, progress=lambda line: console.print(line, markup=False))
    if args.json:
        print_json(result.metrics)
        return 0
    out_console.print(metrics_table(result.metrics, f"{imported.framework} · {result.scorer_ids[0]} · {result.path}"))
    for key, pair in result.check.items():
        ours, theirs = pair["polytox"], pair["framework"]
        diff = "" if ours is None or theirs is None else f" (difference {abs(ours - theirs):.2g})"
        console.print(f"{key.upper()}: {imported.framework} printed {theirs}, polytox computes {ours}{diff}")
    if len(result.scorer_ids) > 1:
        console.print(
            f"other scorers stored: {', '.join(result.scorer_ids[1:])} (polytox metrics {result.path} --scorer ID)"
        )
    return 0
