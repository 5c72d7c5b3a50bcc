"""The ``polytox score`` subcommand: input reading (``add_input_args``, ``read_rows``, shared with
``compare-scorers`` and ``calibrate``) and the call to ``polytox.scoring.score_file``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from ..spec import DEFAULT_SCORER, load_yaml_config, parse_options
from .common import console, progress_bar
from .flags import add_scorer_flags

DESCRIPTION = """\
Score every text of a JSONL / CSV / Parquet file with one scorer.

Output (JSONL or Parquet, by the --out extension): one row per input row, in order, with id, lang,
lang_detected, scorer, toxicity and the scorer's other attributes (null on failure) and error (null when
the row scored). Rerunning the same command resumes through the score cache: cached scores are free,
transient errors (timeouts, quota) are retried. The scorer is given as in polytox eval:
--scorer NAME --scorer-opt KEY=VALUE (or scorer: / scorer_opt: in --config).

example:
  polytox score --input texts.jsonl --out scores.parquet --scorer default
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "score",
        help="score a file of texts with one scorer (JSONL/Parquet out, resumable)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scorer_flags(p, unset=True)  # a --config file may name them
    p.add_argument("--config", help="YAML with 'scorer' and 'scorer_opt' (e.g. an eval config); flags win")
    p.add_argument("--input", required=True, help="JSONL, CSV or Parquet with a text column")
    p.add_argument("--out", required=True, help="output .jsonl or .parquet")
    add_input_args(p)
    p.add_argument("--chunk-size", type=int, default=0, help="texts per scorer call (0 = automatic)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def add_input_args(p: argparse.ArgumentParser) -> None:
    """Where the text, id and language are in the input records (shared with compare-scorers, calibrate)."""
    p.add_argument(
        "--layout",
        default="auto",
        choices=["auto", "generic", "rtp", "rtplx", "ptp"],
        help="record layout (default: recognised from the first record)",
    )
    p.add_argument(
        "--text-field",
        action="append",
        metavar="PATH",
        help="dotted path of the text (repeatable: one output row per field per record)",
    )
    p.add_argument("--id-field", metavar="PATH", help="dotted path of the id (default: id, else the row number)")
    p.add_argument("--lang-field", metavar="PATH", help="dotted path of the language (default: lang)")
    p.add_argument(
        "--default-lang", metavar="CODE", help="language of rows without one (default: detect with py3langid)"
    )


def read_rows(args: argparse.Namespace) -> Any:
    from ..scoring.textio import read_text_rows

    return read_text_rows(
        Path(args.input),
        layout=args.layout,
        text_fields=tuple(args.text_field or ()),
        id_field=args.id_field,
        lang_field=args.lang_field,
        default_lang=args.default_lang,
    )


def scorer_choice(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """(name, options) from --config, then flags (flags win)."""
    from ..settings import CONFIG_KEYS

    config: dict[str, Any] = load_yaml_config(args.config, CONFIG_KEYS) if getattr(args, "config", None) else {}
    name = args.scorer or config.get("scorer") or DEFAULT_SCORER
    options = {k: str(v) for k, v in parse_options(config.get("scorer_opt") or {}).items()}
    options.update(parse_options(args.scorer_opt or []))
    return str(name), options


def run(args: argparse.Namespace) -> int:
    from ..scoring import build_scorer
    from ..scoring.cache import CachedScorer
    from ..scoring.score_file import output_kind, score_rows, summarize, write_score_table

    out = Path(args.out)
    output_kind(out)  # fail on a bad extension before any work
    if out.exists() and Path(args.input).exists() and os.path.samefile(out, args.input):
        raise PolytoxError(f"--out {args.out} is the --input file itself; write the scores to another file")
    if args.chunk_size < 0:
        raise PolytoxError("--chunk-size must be >= 0")
    name, options = scorer_choice(args)
    rows = read_rows(args)
    scorer = build_scorer(name, options)
    started = time.monotonic()
    try:
        with progress_bar("score", enabled=not args.no_progress) as callback:
            scores = score_rows(scorer, rows, args.chunk_size, callback)
        write_score_table(out, rows, scores, scorer.id, scorer.attributes)
    finally:
        scorer.close()
    summary = summarize(rows, scores)
    cached = next((s for s in (scorer, getattr(scorer, "inner", None)) if isinstance(s, CachedScorer)), None)
    hits = f", {cached.hits} from the cache" if cached is not None else ""
    console.print(
        f"{out}: {summary.rows} rows, {summary.scored} scored{hits}, "
        f"{summary.rows - summary.scored} with an error, {summary.lang_detected} language(s) "
        f"detected ({time.monotonic() - started:.1f} s) · scorer {scorer.id}"
    )
    for kind, count in summary.errors.most_common(10):
        console.print(f"  [yellow]{count} × {kind}[/yellow]")
    if summary.transient:
        console.print(
            f"[yellow]{summary.transient} transient error(s) were not cached: rerun the same "
            "command to retry them[/yellow]"
        )
    return 0
