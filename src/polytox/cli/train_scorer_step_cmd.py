"""``polytox train-scorer-step STEP``: the default scorer's steps around ``train-scorer``, one runner.

``pool`` embeds the training pool into the embedding cache (``training.scorer.pool.extract``), ``scale-rows``
writes the committed head's raw outputs of the scale rows (``training.scorer.scale_rows.write_raw_outputs``),
``scale-fit`` fits the named scales on them (``training.scorer.scale_fit.fit_named_scales``). The training
modules hold the work as library functions; this module only reads the flags and prints. How the committed
head and scales were made: docs/default-scorer.md ("Retraining") and docs/scorer-scales.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from .common import DATA_ENV, console, data_folder, out_console

# ``training.scorer.scale_fit.FORMS`` (a test keeps them equal): named here so that building the parser
# imports no training code
MAP_FORMS = ("equipercentile", "anchored")

DESCRIPTION = """\
The default scorer's steps around 'polytox train-scorer', each resumable:

  pool        embed the training pool's texts into the embedding cache, most useful tier first,
              so a later train-scorer reads them from the cache
  scale-rows  compute the committed head's raw output of every text the named scales are fitted on
              (one parquet part per chunk; an interrupted run resumes)
  scale-fit   fit the named scales on those raw outputs, measure them on the held-out split, and write
              the scales file (default: the one the polytox-ml scorer loads)

Each reads the project's data folder (--shared DIR, or $POLYTOX_DATA).

example:
  polytox train-scorer-step pool --shared DATA
  polytox train-scorer-step scale-rows --shared DATA --out raw/
  polytox train-scorer-step scale-fit --shared DATA --raw raw/ --out scales.json
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "train-scorer-step",
        help="the default scorer's other steps: embed the pool, raw outputs, fit the scales",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = p.add_subparsers(dest="step", required=True, metavar="STEP")
    pool = steps.add_parser(
        "pool",
        help="embed the training pool into the embedding cache (resumes)",
        description="embed the training pool into the embedding cache (resumes)",
    )
    _shared(pool)
    pool.add_argument("--backbone", default="gemma-3-270m", help="LM whose hidden states are embedded")
    # numbers, the --layers list and the outputs are checked by their rows in cli/checks.py
    pool.add_argument("--layers", default="5,7,9", help="decoder layers to mean-pool")
    pool.add_argument("--max-tokens", type=int, default=128, help="tokens per text")
    pool.add_argument("--batch-size", type=int, default=32, help="texts per forward pass")
    pool.add_argument("--cache", default=None, help="embedding cache file (default: the polytox cache)")
    pool.add_argument("--threads", type=int, default=None, help="torch threads")
    pool.add_argument("--max-tier", type=int, default=4, help="embed tiers 1..N only")
    pool.set_defaults(func=run_pool)

    rows = steps.add_parser(
        "scale-rows",
        help="the committed head's raw outputs of the scale rows (resumes)",
        description="the committed head's raw outputs of the scale rows (resumes)",
    )
    _shared(rows)
    rows.add_argument("--out", required=True, help="a folder: one parquet part per chunk (resumes)")
    rows.add_argument("--mode", choices=("full", "ngram"), default="full", help="the head mode read")
    rows.add_argument("--chunk", type=int, default=1000, help="texts per part")
    rows.add_argument("--threads", type=int, default=1, help="torch threads")
    rows.add_argument("--max-priority", type=int, default=4, help="rows of priority 1..N only")
    rows.set_defaults(func=run_scale_rows)

    fit = steps.add_parser(
        "scale-fit",
        help="fit the named scales on the raw outputs and measure them",
        description="fit the named scales on the raw outputs and measure them",
    )
    _shared(fit)
    fit.add_argument("--raw", help="the folder 'polytox train-scorer-step scale-rows' wrote (required to fit)")
    fit.add_argument("--out", default=None, help="the scales file (default: the one the scorer loads)")
    fit.add_argument("--measurements", help="write the held-out measurements (JSON) here too")
    fit.add_argument(
        "--everyday",
        action="store_true",
        help="anchor the harmless end with the fit part of ud-sentences' Parallel UD ids (raw outputs in --raw)",
    )
    fit.add_argument(
        "--form",
        choices=MAP_FORMS,
        default=MAP_FORMS[0],
        help="the other languages' maps: quantile equating, or smooth maps anchored at both ends",
    )
    fit.add_argument(
        "--other-genres",
        action="store_true",
        help="--form anchored: the fit part's other everyday sentences (raw outputs in --raw) as one more stratum",
    )
    fit.add_argument(
        "--flat-only",
        action="store_true",
        help="refit nothing: measure the committed scales' flat steps into their card data (--out)",
    )
    fit.set_defaults(func=run_scale_fit)


def _shared(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shared", help=f"the data folder holding rtp/, rtp-lx/ and scorer-train/ (default: ${DATA_ENV})")


def _data(args: argparse.Namespace) -> Path:
    return data_folder(
        args.shared,
        f"train-scorer-step {args.step}: give --shared DIR (or {DATA_ENV}), the data folder holding rtp/, "
        "rtp-lx/ and scorer-train/",
    )


def run_pool(args: argparse.Namespace) -> int:
    from ..training.scorer.pool import extract, tier_counts, training_pool

    rows = training_pool(_data(args), everyday=True)
    console.print(f"pool: {len(rows)} rows, per tier {tier_counts(rows)}")
    computed = extract(
        rows,
        args.backbone,
        [int(x) for x in args.layers.split(",") if x.strip()],
        max_tokens=args.max_tokens,
        batch_size=args.batch_size,
        cache_path=args.cache,
        threads=args.threads,
        max_tier=args.max_tier,
    )
    console.print(f"embedded {computed} texts not yet in the cache")
    return 0


def run_scale_rows(args: argparse.Namespace) -> int:
    from ..training.scorer.scale_rows import write_raw_outputs

    write_raw_outputs(
        _data(args),
        args.out,
        mode=args.mode,
        chunk=args.chunk,
        threads=args.threads,
        max_priority=args.max_priority,
        say=lambda line: console.print(line, markup=False, highlight=False),
    )
    return 0


def run_scale_fit(args: argparse.Namespace) -> int:
    from ..scoring.ml.scales import default_scales_path, write_scales
    from ..training.scorer.scale_fit import fit_named_scales, measure_flat_steps

    if args.flat_only:
        measure_flat_steps(args.out or default_scales_path())
        return 0
    if not args.raw:
        raise PolytoxError("train-scorer-step scale-fit: give --raw DIR (the raw outputs to fit on), or --flat-only")
    scales, measured = fit_named_scales(
        _data(args), args.raw, everyday=args.everyday, form=args.form, other_genres=args.other_genres
    )
    write_scales(scales, args.out or default_scales_path())
    if args.measurements:
        Path(args.measurements).write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    out_console.print_json(json.dumps({n: s.info["heldout"] for n, s in scales.scales.items()}))
    return 0
