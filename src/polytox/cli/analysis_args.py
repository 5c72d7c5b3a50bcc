"""Flags shared by ``leaderboard``, ``analyze`` and ``report``: which runs, which scorer, which subset."""

from __future__ import annotations

import argparse
from typing import Any

from ..constants import DEFAULT_COMPARISON, TOXIC_THRESHOLD

META_HELP = (
    "YAML of model metadata: 'models: {NAME: {family, params, category, alignment}}' and optional "
    "'runs: {RUN_DIR_NAME: {model, prompt_set, ...}}'; overrides a manifest's model_meta"
)


def add_common(p: argparse.ArgumentParser, listings: bool = True) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="run directories, or folders searched recursively for them"
    )
    p.add_argument("--meta", metavar="YAML", help=META_HELP)
    p.add_argument(
        "--scorer",
        help="stored scorer to use: full id, directory name or bare name such as 'svm' (default: each run's own)",
    )
    p.add_argument(
        "--attribute",
        default="toxicity",
        type=str.lower,
        help="score attribute: severe_toxicity, insult, ... of runs scored with attributes=rtp (default: toxicity)",
    )
    p.add_argument("--lang", action="append", help="only these languages (repeatable or comma list)")
    p.add_argument("--model", action="append", help="only these models (repeatable)")
    p.add_argument("--prompt-set", action="append", help="only these prompt sets, e.g. RTP, RTP-LX (repeatable)")
    p.add_argument("--threshold", type=float, default=TOXIC_THRESHOLD, help="toxic threshold (default 0.5)")
    p.add_argument(
        "--comparison",
        choices=[">=", ">"],
        default=DEFAULT_COMPARISON,
        help="toxic comparison (default >=; RTP's notebooks used >)",
    )

    p.add_argument(
        "--scale",
        help="re-read polytox-ml / default scores on another scale from their stored raw "
        "values (perspective-2020, perspective-2022, raters, head, head:web; see 'polytox scorers')",
    )

    if listings:
        p.add_argument("--top", type=int, default=10, help="examples listed per table (default 10)")


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(part.strip() for v in values or [] for part in v.split(",") if part.strip())


def load_corpus(args: argparse.Namespace, **extra: Any) -> tuple[Any, Any]:
    """(RunCollection, AnalysisOptions) from the common flags."""
    from ..analysis import AnalysisOptions, RunCollection, load_meta_file, load_runs
    from ..errors import PolytoxError
    from ..langs import UnknownLanguageError, normalize_lang
    from ..spec import MetricsSpec

    if not 0.0 <= args.threshold <= 1.0:
        raise PolytoxError(f"--threshold must be in [0, 1], got {args.threshold}")
    if args.lang and not _split(args.lang):  # --lang "" or ",,,": no language, which is not "all of them"
        raise PolytoxError("--lang: no language code given; name one or more (e.g. en,de), or leave it out")
    try:
        langs = tuple(normalize_lang(x) for x in _split(args.lang))
    except UnknownLanguageError as exc:
        raise PolytoxError(f"--lang: {exc}") from None
    runs = load_runs(args.runs, load_meta_file(args.meta))
    corpus = RunCollection(
        runs, MetricsSpec(threshold=args.threshold, comparison=args.comparison), scale=getattr(args, "scale", None)
    )
    opts = AnalysisOptions(
        scorer=args.scorer,
        attribute=args.attribute,
        langs=langs,
        models=_split(args.model),
        prompt_sets=_split(args.prompt_set),
        top=getattr(args, "top", 10),
        **extra,
    )
    corpus.require_attribute(opts.scorer, opts.attribute)
    return corpus, opts
