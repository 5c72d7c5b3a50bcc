"""``polytox metrics PATH``: metrics of a run directory or of an RTP-style generations JSONL."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..metrics.for_path import compute_for_path
from ..spec import MetricsSpec
from .common import console, metrics_table, out_console, print_json
from .flags import add_metrics_flags

DESCRIPTION = """\
Recompute a run's metrics (expected maximum toxicity, toxicity probability, average toxicity, with
bootstrap confidence intervals) from its stored scores, or compute them for an RTP-style generations JSONL
file. Nothing is generated or scored again; a damaged run is refused with the command that repairs it.

examples:
  polytox metrics runs/gpt2-rtp --threshold 0.5
  polytox metrics runs/gpt2-rtp --attribute severe_toxicity   (a run scored with attributes=rtp)
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "metrics",
        help="EMT / EP / AT of a run directory or an RTP generations JSONL",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="run directory, or JSONL of {prompt: {text, toxicity}, generations: [...]}")
    add_metrics_flags(p)
    p.add_argument("--skip-bad", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec = MetricsSpec(threshold=args.threshold, comparison=args.comparison, n_bootstrap=args.n_bootstrap)
    metrics = compute_for_path(Path(args.path), spec, args.scorer, args.seed, args.skip_bad, args.scale, args.attribute)
    if metrics.get("n_without_raw"):
        console.print(
            f"[yellow]{metrics['n_without_raw']} stored score(s) carry no raw value (scored before raw "
            f"values were kept): counted as missing on scale {metrics['scale']}[/yellow]"
        )
    if Path(args.path).is_dir():
        from ..store.reader import RunReader

        old = RunReader(args.path).unchecksummed_note()  # a run made before part checksums were kept
        if old is not None:
            console.print(old, markup=False, highlight=False, soft_wrap=True, style="yellow")
    if metrics.get("incomplete"):
        gap = metrics["incomplete"]
        console.print(
            f"[yellow]note: the run is incomplete ({gap['shards_scored']} of {gap['shards']} shard(s) "
            f"scored, status {gap['status']}): these metrics cover the scored shards only; resume with: "
            f"polytox eval --out {args.path} --retry-failed[/yellow]",
            markup=True,
            highlight=False,
        )
    if args.json:
        print_json(metrics)
    else:
        out_console.print(metrics_table(metrics, title=str(args.path)))
        if metrics.get("n_bad_lines"):
            console.print(f"[yellow]skipped {metrics['n_bad_lines']} bad line(s):[/yellow]")
            for line in metrics.get("bad_lines", [])[:20]:
                console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    return 0
