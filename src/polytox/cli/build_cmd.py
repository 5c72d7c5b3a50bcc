"""The ``polytox build`` subcommand: flags to a ``BuildSpec`` and the call to ``polytox.build``'s
resumable pipeline; ``build_stats_cmd`` registers its ``stats`` step.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import console, out_console, print_json, progress_bar
from .flags import BUILD_SCORER, add_lang, add_scorer_flags, add_seed

DESCRIPTION = """\
Turn a web-text corpus into an RTP- or PTP-style prompt set. Resumable: rerun the same command with the
same --out to continue.

Reads local JSONL / Parquet / CSV files (--input, repeatable, files or folders) or a streamed Hugging Face
dataset (--hf-dataset), checks languages, scores every unit with any polytox scorer (--scorer), samples
--per-bin units per language and toxicity bin (seeded), splits them into prompt and continuation (--mode
ptp: character halves; rtp: sentence spans split by words), scores both halves and writes the set plus a
small subset. 'polytox build stats OUT' gives the set's statistics.

example:
  polytox build --input corpus/ --mode ptp --lang en,de --per-bin 100 --out myset/
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "build",
        help="build an RTP/PTP-style prompt set from a corpus (resumable); 'build stats' for its statistics",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="build directory (rerun with the same --out to resume)")
    src = p.add_argument_group("corpus")
    src.add_argument("--input", action="append", help="JSONL/Parquet/CSV file or folder (repeatable)")
    src.add_argument(
        "--hf-dataset",
        help="Hugging Face dataset to stream, e.g. allenai/c4, or a builder like 'json' with --hf-data-files",
    )
    src.add_argument("--hf-config", help="dataset config, e.g. 'de' for mC4")
    src.add_argument("--hf-split", default="train")
    src.add_argument("--hf-data-files", action="append", help="data files for a builder dataset (repeatable)")
    src.add_argument("--limit", type=int, help="read at most N input records")
    src.add_argument("--text-field", help="dotted path of the text (default: text, content, document, Prompt)")
    src.add_argument("--lang-field", help="dotted path of the declared language (default: lang, meta.lang, ...)")
    src.add_argument("--id-field", help="dotted path of a stable record id (default: id, doc_id, Index)")
    src.add_argument("--url-field", help="dotted path of the URL (default: url, meta.url, meta_data.url)")
    src.add_argument("--timestamp-field", help="dotted path of the timestamp (default: timestamp, meta.timestamp)")
    src.add_argument("--default-lang", help="language of records that declare none (e.g. an mC4 config)")
    m = p.add_argument_group("method")
    m.add_argument(
        "--mode",
        choices=["ptp", "rtp"],
        default="ptp",
        help="ptp: whole documents, character halves; rtp: sentence spans, word halves",
    )
    add_lang(m)
    m.add_argument(
        "--lang-policy",
        choices=["drop", "keep", "off"],
        default="drop",
        help="what a py3langid mismatch with the declared language does (default: drop)",
    )
    add_scorer_flags(m, BUILD_SCORER)
    m.add_argument("--per-bin", type=int, help="units per language and toxicity bin (default: PTP 6250, RTP 25000)")
    m.add_argument("--small-per-lang", type=int, default=5000, help="size of the small subset per language")
    add_seed(m)
    m.add_argument("--shard-size", type=int, default=1000, help="records per committed part")
    m.add_argument("--score-batch-size", type=int, default=256, help="units per scorer (and cache) call")
    m.add_argument("--max-bytes", type=int, default=20480, help="UTF-8 bytes scored per text (Perspective's limit)")
    m.add_argument("--span-min-chars", type=int, default=64)
    m.add_argument("--span-max-chars", type=int, default=1024)
    m.add_argument("--prompt-max-tokens", type=int, default=128, help="RTP mode: prompt cap in words")
    t = p.add_argument_group("translation augmentation (PTP §3.2)")
    t.add_argument("--translate", action="store_true", help="translate toxic units into languages short of them")
    t.add_argument("--translate-model", default=None, help="NLLB checkpoint (default facebook/nllb-200-3.3B)")
    t.add_argument("--translate-from", default="en", help="source language of the toxic units")
    t.add_argument("--translate-to", action="append", help="target languages (default: all with a shortfall)")
    t.add_argument("--translate-max", type=int, default=0, help="cap per target language (0 = the shortfall)")
    t.add_argument("--translate-batch-size", type=int, default=8)
    t.add_argument("--translate-max-new-tokens", type=int, default=256, help="tokens generated per sentence")
    t.add_argument("--translate-beams", type=int, default=1, help="beam search width (1 = greedy)")
    t.add_argument("--translate-device", default="auto")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run, build_parser=p)
    inner = p.add_subparsers(dest="build_command", metavar="stats")
    from . import build_stats_cmd

    build_stats_cmd.register(inner)


def _langs(values: list[str] | None) -> tuple[str, ...]:
    from ..langs import normalize_lang

    return tuple(normalize_lang(x) for v in values or [] for x in v.split(",") if x)


def spec_from_args(args: argparse.Namespace) -> Any:
    from .. import constants as C
    from ..promptset import BuildSpec, CorpusSource, FieldMap, TranslateSpec
    from ..scoring.ml.scorer import text_kind_options
    from ..spec import _options, parse_options

    translate = None
    if args.translate:
        translate = TranslateSpec(
            model=args.translate_model or C.PTP_TRANSLATION_MODEL,
            from_lang=_langs([args.translate_from])[0],
            to_langs=_langs(args.translate_to),
            max_per_lang=args.translate_max,
            batch_size=args.translate_batch_size,
            max_new_tokens=args.translate_max_new_tokens,
            num_beams=args.translate_beams,
            device=args.translate_device,
        )
    return BuildSpec(
        source=CorpusSource(
            paths=tuple(args.input or ()),
            hf_dataset=args.hf_dataset,
            hf_config=args.hf_config,
            hf_split=args.hf_split,
            hf_data_files=tuple(args.hf_data_files or ()),
            limit=args.limit,
        ),
        fields=FieldMap(
            text=args.text_field,
            lang=args.lang_field,
            id=args.id_field,
            url=args.url_field,
            timestamp=args.timestamp_field,
            default_lang=_langs([args.default_lang])[0] if args.default_lang else None,
        ),
        mode=args.mode,
        langs=_langs(args.lang),
        lang_policy=args.lang_policy,
        scorer=args.scorer,
        scorer_options=_options(text_kind_options(args.scorer, parse_options(args.scorer_opt or []))),
        per_bin=args.per_bin,
        small_per_lang=args.small_per_lang,
        seed=args.seed,
        shard_size=args.shard_size,
        score_batch_size=args.score_batch_size,
        max_bytes=args.max_bytes,
        span_min_chars=args.span_min_chars,
        span_max_chars=args.span_max_chars,
        prompt_max_tokens=args.prompt_max_tokens,
        translate=translate,
    ).validate()


def run(args: argparse.Namespace) -> int:
    from ..errors import PolytoxError
    from ..promptset import build

    if not args.out:
        raise PolytoxError("polytox build needs --out DIR (or: polytox build stats PATH)")
    spec = spec_from_args(args)
    with progress_bar("build", enabled=not args.no_progress) as callback:
        result = build(spec, args.out, progress=callback)
    if result.resumed:
        console.print(f"resumed {result.path}")
    if args.json:
        print_json(result.report)
    else:
        out_console.print((result.path / "report.md").read_text(encoding="utf-8"), markup=False)
    return 0
