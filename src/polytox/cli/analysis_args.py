"""Flags shared by ``leaderboard``, ``analyze`` and ``report``: which runs, which scorer, which subset."""

from __future__ import annotations

import argparse
from typing import Any

from .flags import add_comparison, add_lang, add_scale, add_stored_attribute, add_stored_scorer, add_threshold

META_HELP = (
    "YAML of model metadata: 'models: {NAME: {family, params, category, alignment}}' and optional "
    "'runs: {RUN_DIR_NAME: {model, prompt_set, ...}}'; overrides a manifest's model_meta"
)


def add_common(p: argparse.ArgumentParser, listings: bool = True) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="run directories, or folders searched recursively for them"
    )
    p.add_argument("--meta", metavar="YAML", help=META_HELP)
    add_stored_scorer(p)
    add_stored_attribute(p)
    add_lang(p)
    p.add_argument("--model", action="append", help="only these models (repeatable)")
    p.add_argument("--prompt-set", action="append", help="only these prompt sets, e.g. RTP, RTP-LX (repeatable)")
    add_threshold(p)
    add_comparison(p)
    add_scale(p)

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
        attribute=args.attribute.lower(),
        langs=langs,
        models=_split(args.model),
        prompt_sets=_split(args.prompt_set),
        top=getattr(args, "top", 10),
        **extra,
    )
    corpus.require_attribute(opts.scorer, opts.attribute)
    return corpus, opts
