"""``polytox train-scorer``: train the polytox-ml head and print its cross-validated quality per language.

Trains on RTP-LX human ratings (and RTP Perspective scores with --rtp), with K-fold cross-validation
grouped by source prompt (RTP-LX Index), then fits the head on all the data and writes it (a small .npz).
The committed head was made with:

  polytox train-scorer --out src/polytox/data/polytox-ml-head.npz --report docs/trainscorer-cv.json

Backbone hidden states are cached on disk (model x text hash), so a second training run costs seconds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..langs import PTP_LANGUAGES, normalize_lang
from .common import console, out_console, progress_bar

DEFAULT_SHARED = Path("..") / "shared" / "data"


def register(sub: Any) -> None:
    p = sub.add_parser("train-scorer", help="train the polytox-ml head (grouped CV per language; reproducible)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="where to write the head (.npz)")
    p.add_argument("--rtplx", default=str(DEFAULT_SHARED / "rtp-lx"), help="RTP-LX folder (RTP_LX_<LOC>.jsonl)")
    p.add_argument("--rtp", default=str(DEFAULT_SHARED / "rtp"),
                   help="RTP folder with Perspective scores ('none' to train on RTP-LX alone)")
    p.add_argument("--lexicon-dir", default=str(DEFAULT_SHARED / "ldnoobw"),
                   help="LDNOOBW lists for the lexicon baseline ('none' to skip it)")
    p.add_argument("--lang", action="append", help="train on these languages only (default: PTP's 17)")
    p.add_argument("--backbone", default="gemma-3-270m",
                   help="LM whose hidden states are features ('none': character n-grams only)")
    p.add_argument("--layers", default="7,9", help="decoder layers to mean-pool (comma list)")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens per text read by the backbone")
    p.add_argument("--alpha-ngram", type=float, default=0.5, help="ridge penalty of the n-gram part")
    p.add_argument("--alpha-emb", type=float, default=3000.0, help="ridge penalty of the embedding part")
    p.add_argument("--rtp-weight", type=float, default=2.0, help="sample weight of RTP texts in the regressions")
    p.add_argument("--index-mean-weight", type=float, default=0.5,
                   help="blend each rating with its source prompt's mean rating over translations (0 = off)")
    p.add_argument("--ngram-features", type=int, default=2**17, help="hash buckets of the n-gram part")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--groups-limit", type=int, help="subset: this many RTP-LX source prompts (seeded)")
    p.add_argument("--rtp-limit", type=int, help="subset: this many RTP texts (seeded)")
    p.add_argument("--batch-size", type=int, default=32, help="texts per backbone forward pass")
    p.add_argument("--embedding-cache", help="SQLite file of cached embeddings (default: in the polytox cache; "
                   "'off' to disable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baselines", action="store_true", help="skip the lexicon and SVM columns")
    p.add_argument("--report", help="also write the quality table as JSON (and .md beside it)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")

    atomic_write(path, write)


def run(args: argparse.Namespace) -> int:
    from ..scoring.ml.baselines import lexicon_baseline, svm_baseline
    from ..scoring.ml.ngrams import NgramConfig
    from ..scoring.ml.quality import markdown_table
    from ..scoring.ml.train import TrainConfig, load_examples, train

    langs = tuple(sorted({normalize_lang(x) for v in (args.lang or []) for x in v.split(",") if x})) \
        or PTP_LANGUAGES
    config = TrainConfig(
        rtplx=args.rtplx, rtp=None if args.rtp == "none" else args.rtp, langs=langs,
        backbone=None if args.backbone == "none" else args.backbone,
        layers=tuple(int(x) for x in args.layers.split(",") if x.strip()), max_tokens=args.max_tokens,
        ngram=NgramConfig(n_features=args.ngram_features), alpha_ngram=args.alpha_ngram,
        alpha_emb=args.alpha_emb, index_mean_weight=args.index_mean_weight,
        rtp_weight=args.rtp_weight, folds=args.folds, groups_limit=args.groups_limit, rtp_limit=args.rtp_limit,
        batch_size=args.batch_size, seed=args.seed, embedding_cache=args.embedding_cache)
    started = time.perf_counter()
    baselines: dict[str, Any] = {}
    notes: list[str] = []
    examples = load_examples(config)
    if not args.no_baselines:
        if args.lexicon_dir != "none":
            scores, how = lexicon_baseline(examples, args.lexicon_dir)
            baselines["lexicon"] = scores
            notes.append(f"lexicon: {how}")
        svm = svm_baseline(examples)
        if svm is not None:
            baselines["svm (en)"] = svm
        else:
            notes.append("svm: alt-profanity-check not installed, column left out")
    with progress_bar("train", enabled=not args.no_progress) as callback:
        result = train(config, progress=callback, baselines=baselines, examples=examples)
    result.head.meta["notes"] = notes
    digest = result.head.save(args.out)
    elapsed = time.perf_counter() - started
    table_md = markdown_table(result.table)
    out_console.print(table_md, markup=False, highlight=False)
    for note in notes:
        console.print(f"note: {note}")
    size = Path(args.out).stat().st_size
    console.print(f"wrote {args.out} ({size / 1024:.0f} KiB, digest {digest}) from {len(result.examples)} texts "
                  f"in {elapsed:.0f} s")
    if args.report:
        report = {"config": config.to_dict(), "table": result.table, "notes": notes, "head": args.out,
                  "digest": digest, "seconds": round(elapsed, 1)}
        blob = json.dumps(report, indent=2, default=str)
        write_text(Path(args.report), blob)
        write_text(Path(args.report).with_suffix(".md"), table_md + "\n")
    return 0
