"""The ``polytox detox`` subcommand and its actions (corpus, train, perplexity, compare): argument parsing and
output; the work is in ``polytox.detox`` and ``polytox.analysis.detox_compare``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import constants as C
from .._util.atomic import atomic_write_text
from ..errors import PolytoxError
from .common import DATA_ENV, console, out_console
from .common import data_folder as common_data_folder
from .flags import DETOX_CORPUS_LANG, add_lang, add_seed

DESCRIPTION = """\
Detoxification (RTP §5): build the training corpus, train detoxification models, compare runs.

  polytox detox corpus --from SCORED.jsonl --exclude PROMPTS.jsonl --out corpus/
  polytox detox train dapt --corpus corpus/ --subset nontoxic --out models/dapt
  polytox detox train atcon|vocab-shift|pplm-head --corpus corpus/ --out models/X
  polytox detox perplexity --model models/dapt --corpus corpus/          (RTP Table 10, held-out text)
  polytox detox compare RUN... [--label NAME ...] [--markdown PATH] [--json PATH]   (RTP Table 3)

Decoding-time methods are used in any evaluation: polytox eval --detox NAME[:key=value,...].
"""  # the user-facing text of --help (the module docstring is for developers)

# The default corpus: every English source of the data folder with a label, each with its own rule.
DEFAULT_SOURCES = [
    f"scorer-train/en-perspective.jsonl:score=perspective,toxic={C.DETOX_TOXIC_MIN},nontoxic={C.DETOX_NONTOXIC_MAX}",
    "scorer-train/en-human.jsonl:label=toxic",
    "scorer-train/multilingual-human.jsonl:label=toxic,lang=en",
]
DEFAULT_EXCLUDE = ["rtp/toxic.jsonl", "rtp/nontoxic.jsonl"]


def data_folder(given: str | None) -> Path:
    """The folder the default sources and excluded prompts are read from (``common.data_folder``)."""
    return common_data_folder(
        given,
        f"detox corpus: give --source (or --from) and --exclude, or --data DIR (or {DATA_ENV}) holding "
        "scorer-train/ and rtp/",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "detox",
        help="detoxification (RTP §5): corpus, training, comparison table",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dsub = p.add_subparsers(dest="detox_command", required=True, metavar="ACTION")

    c = dsub.add_parser("corpus", help="balanced toxic/non-toxic corpus from labelled sources, disjoint from prompts")
    c.add_argument(
        "--source",
        dest="rules",
        action="append",
        metavar="PATH[:RULE]",
        help="a source and its label rule (repeatable): score=FIELD,toxic=X,nontoxic=Y | "
        "score=FIELD,percentile=P | label=FIELD, plus text=, lang=, by=, name= (docs/detox.md); "
        "default: the data folder's English en-perspective (>= 0.5 / <= 0.1), en-human and MLMA-en",
    )
    c.add_argument(
        "--data",
        metavar="DIR",
        help=f"data folder with scorer-train/ and rtp/, read by the default --source and --exclude "
        f"(default: ${DATA_ENV}; docs/detox.md)",
    )
    c.add_argument(
        "--balance",
        choices=["per-source", "total"],
        default="per-source",
        help="per-source: each dataset gives both sides as many documents (default)",
    )
    c.add_argument(
        "--from",
        dest="sources",
        action="append",
        help="one scored JSONL cut at its bottom / top --percentile (the single-source form; repeatable)",
    )
    c.add_argument(
        "--exclude",
        action="append",
        help="prompt files whose texts must not be trained on (repeatable; default: the data folder's rtp/*.jsonl)",
    )
    c.add_argument("--text-field", default="text")
    c.add_argument("--score-field", default="perspective", help="dotted path of the toxicity score")
    c.add_argument("--percentile", type=float, help="tail size in percent (default 2, RTP Appendix B.2)")
    add_lang(c, DETOX_CORPUS_LANG)
    add_seed(c)
    c.add_argument("--out", required=True)
    c.set_defaults(func=run_corpus)

    t = dsub.add_parser("train", help="train dapt | atcon | vocab-shift | pplm-head (resumable)")
    t.add_argument("method", choices=["dapt", "atcon", "vocab-shift", "pplm-head"])
    t.add_argument("--corpus", required=True, help="folder from 'polytox detox corpus'")
    t.add_argument("--model", default="smollm2-135m-instruct", help="base causal LM (alias, hub id or path)")
    t.add_argument(
        "--subset",
        choices=["nontoxic", "toxic"],
        default="nontoxic",
        help="dapt: which side to adapt on (toxic = DExperts' anti-expert)",
    )
    t.add_argument("--out", required=True)
    t.add_argument("--epochs", type=float, help="default: 1 (pplm-head: 10, Dathathri et al.)")
    t.add_argument("--max-steps", type=int, default=-1, help="stop after N optimiser steps (overrides epochs)")
    t.add_argument("--batch-size", type=int, help="default: 8 (dapt/atcon/vocab-shift), 64 (pplm-head)")
    t.add_argument("--grad-accum", type=int, default=1)
    t.add_argument("--lr", type=float, help="default: 5e-5 (dapt/atcon), 1e-3 (vocab-shift), 1e-4 (pplm-head)")
    t.add_argument(
        "--max-length",
        type=int,
        default=C.DAPT_BLOCK_SIZE,
        help="tokens per packed training block (pplm-head: per document, at most 100)",
    )
    t.add_argument("--save-steps", type=int, default=50, help="checkpoint every N steps (resume point)")
    t.add_argument("--lora", action="store_true", help="train LoRA adapters (needs peft) and merge them")
    add_seed(t)
    t.set_defaults(func=run_train)

    x = dsub.add_parser("perplexity", help="a model's perplexity on the corpus' held-out text (RTP Table 10)")
    x.add_argument("--model", required=True)
    x.add_argument("--corpus", required=True)
    x.add_argument("--subset", choices=["all", "nontoxic"], default="all")
    x.add_argument("--atcon", action="store_true", help="prepend <|nontoxic|> (an ATCON model)")
    x.set_defaults(func=run_perplexity)

    m = dsub.add_parser("compare", help="RTP Table 3 for runs: EMT/EP by prompt toxicity, PPL, dist-n")
    m.add_argument("runs", nargs="+")
    m.add_argument("--label", action="append", help="row name per run, in order (default: its --detox)")
    m.add_argument("--markdown", metavar="PATH")
    m.add_argument("--json", metavar="PATH", help="'-' for stdout")
    m.set_defaults(func=run_compare)


def run_corpus(args: argparse.Namespace) -> int:
    from ..detox.corpus import select_corpus
    from ..detox.sources import build_corpus, parse_source

    if args.sources and args.rules:
        raise PolytoxError("give --from (one scored file cut at its tails) or --source, not both")
    exclude = args.exclude or [str(data_folder(args.data) / f) for f in DEFAULT_EXCLUDE]
    if not args.sources:
        rules = args.rules or [str(data_folder(args.data) / r) for r in DEFAULT_SOURCES]
        sources = [parse_source(r, args.lang or None) for r in rules]
        corpus = build_corpus(sources, exclude, balance=args.balance, seed=args.seed)
        corpus.write(Path(args.out))
        s = corpus.stats
        console.print(
            f"{args.out}: {s['n_nontoxic']} non-toxic and {s['n_toxic']} toxic documents "
            f"({s['balance']} balance); {s['n_train']} train, {s['n_heldout']} held out; "
            f"{s['n_overlapping_prompts_removed']} overlapping prompts removed, "
            f"{s['n_skipped_records']} records skipped",
            markup=False,
        )
        for name, row in s["datasets"].items():
            console.print(
                f"  {name}: {row['nontoxic']} non-toxic / {row['toxic']} toxic "
                f"(of {row['available_nontoxic']} / {row['available_toxic']})",
                markup=False,
            )
        return 0
    corpus = select_corpus(
        args.sources,
        exclude,
        text_field=args.text_field,
        score_field=args.score_field,
        percentile=args.percentile or C.DETOX_CORPUS_PERCENTILE,
        lang=args.lang or None,
        seed=args.seed,
    )
    corpus.write(Path(args.out))
    s = corpus.stats
    console.print(
        f"{args.out}: {s['n_per_side']} documents per side (non-toxic <= {s['nontoxic_max_score']:.3f}, "
        f"toxic >= {s['toxic_min_score']:.3f}); {s['n_train']} train, {s['n_heldout']} held out; "
        f"{s['n_overlapping_prompts_removed']} overlapping prompts removed, "
        f"{s['n_skipped_records']} records skipped",
        markup=False,
    )
    return 0


def run_train(args: argparse.Namespace) -> int:
    from ..detox.corpus import read_corpus
    from ..detox.train import TrainConfig, train_lm, train_pplm_head, train_vocab_shift

    corpus = read_corpus(args.corpus)
    epochs = args.epochs if args.epochs is not None else (C.PPLM_HEAD_EPOCHS if args.method == "pplm-head" else 1.0)
    cfg = TrainConfig(
        base_model=args.model,
        out=args.out,
        epochs=epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        lr=args.lr,
        max_length=args.max_length,
        save_steps=args.save_steps,
        lora=args.lora,
        seed=args.seed,
    )
    if args.method in ("dapt", "atcon"):
        out = train_lm(corpus, cfg, args.method, args.subset)
    elif args.method == "vocab-shift":
        out = train_vocab_shift(corpus, cfg)
    else:
        out = train_pplm_head(corpus, cfg)
    meta = json.loads((out / "detox.json").read_text())
    console.print(f"{out}: {args.method} trained ({json.dumps(meta.get('training'))})", markup=False)
    return 0


def run_perplexity(args: argparse.Namespace) -> int:
    from ..detox.corpus import NONTOXIC, read_corpus
    from ..detox.fluency import heldout_perplexity

    corpus = read_corpus(args.corpus)
    texts = corpus.texts(NONTOXIC if args.subset == "nontoxic" else None, heldout=True)
    result = heldout_perplexity(args.model, texts, C.ATCON_NONTOXIC_TOKEN if args.atcon else None)
    out_console.print_json(json.dumps(result))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from rich.table import Table

    from ..analysis.detox_compare import COLUMNS, cells, compare, markdown, to_json

    rows = compare(args.runs, args.label)
    table = Table(
        title="detoxification (RTP Table 3 shape)",
        caption="EMT = expected maximum toxicity (± std) over each prompt's K continuations; EP = "
        "share of prompts with at least one toxic continuation; PPL = mean perplexity of the "
        "continuations under the fluency model (first N: each prompt's first N only); dist-n = "
        "distinct n-grams / words per prompt",
    )
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in ("method", "model") else "right")
    for r in rows:
        table.add_row(*cells(r))
    if args.json == "-":
        print(json.dumps(to_json(rows), indent=2))
    else:
        out_console.print(table)
        if args.json:
            atomic_write_text(Path(args.json), json.dumps(to_json(rows), indent=2) + "\n")
    if args.markdown:
        atomic_write_text(Path(args.markdown), markdown(rows))
    return 0
