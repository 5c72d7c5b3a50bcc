"""``polytox train-scorer``: train the polytox-ml head and regenerate the scorer card's measurement file.

Trains on the training pool (``training.scorer.pool``), keeps the fixed held-out split (a hash of each text
group) out of every fit and every choice, fits the n-gram and hidden-state regressions, the combiners and the
maps onto Perspective's scale, then measures every scorer of the card on the held-out texts. How the
committed head was made, with its timings: docs/default-scorer.md ("Retraining").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from .._util.atomic import atomic_write
from .._util.runlock import OutputLock
from ..constants import CONTINUATION_GEN_SHARE, EVERYDAY_WEIGHT, WEB_GEN_SHARE
from ..errors import PolytoxError
from ..langs import PTP_LANGUAGES, normalize_lang
from .common import DATA_ENV, console, data_folder, out_console, progress_bar
from .flags import TRAINING_LANGS, add_lang

DESCRIPTION = """\
Train the polytox-ml head (the default scorer's head over a small language model's hidden states and
character n-grams) and measure it and the other offline scorers on a held-out split.

The training data are read from the project's data folder (--shared DIR, or $POLYTOX_DATA): RTP-LX human
ratings in 17 languages, RTP's Perspective scores and the scorer training pack. A fixed share of text groups
is held out of every fit and every choice. The head goes to --out, its measurement card beside it (what
polytox scorers prints). Backbone hidden states are cached on disk, so a second run reuses them.

example:
  polytox train-scorer --shared DATA --out my-head.npz
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "train-scorer",
        help="train the polytox-ml head and measure it on a held-out split",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="where to write the head (.npz)")
    p.add_argument(
        "--measurements", help="measurement file for 'polytox scorers' (default: polytox-ml-card.json next to --out)"
    )
    p.add_argument(
        "--shared",
        help=f"the data folder holding rtp/, rtp-lx/, scorer-train/, ud-sentences/ and ldnoobw/ (default: ${DATA_ENV})",
    )
    add_lang(p, TRAINING_LANGS)
    p.add_argument(
        "--backbone",
        default="gemma-3-270m",
        help="LM whose hidden states are features ('none': character n-grams only)",
    )
    p.add_argument("--layers", default="5,7,9", help="decoder layers to mean-pool (comma list)")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens per text read by the backbone")
    p.add_argument("--alpha-ngram", type=float, default=1.0, help="ridge penalty of the n-gram part")
    p.add_argument("--alpha-emb", type=float, default=1000.0, help="ridge penalty of the embedding part")
    p.add_argument("--task-offsets", action="store_true", help="one free offset per label definition")
    p.add_argument("--no-task-weights", action="store_true", help="every row weighs 1")
    p.add_argument("--no-human-data", action="store_true", help="leave out the pack's human-labelled rows")
    p.add_argument(
        "--split-combiner",
        action="store_true",
        help="non-English texts get their own combiner, fitted on RTP-LX's other languages",
    )
    p.add_argument(
        "--other-rtplx-weight",
        type=float,
        default=3.0,
        help="RTP-LX regression weight of the non-English texts' own ridges (0: share the English ones)",
    )
    p.add_argument(
        "--other-task-offsets",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one free offset per label definition in the non-English ridges' fit (default: on)",
    )
    _add_probe_flags(p)
    _add_pair_flags(p)
    p.set_defaults(func=run)


def _add_pair_flags(p: argparse.ArgumentParser) -> None:
    """The terms over translation pairs (a text and its English source), all off by default: measured
    candidates for one scale across languages (docs/scorer-scales.md)."""
    p.add_argument(
        "--consistency-weight",
        type=float,
        default=0.0,
        help="weight of each training pair of a translation and its English source (RTP-LX, toxicity "
        "preserved; Parallel UD) in the non-English ridges, pulling the two outputs together (0: no such "
        "term)",
    )
    p.add_argument(
        "--probe-consistency-weight",
        type=float,
        default=0.0,
        help="the same pairs' term in the non-English attention probe's fit, at this weight per pair (0: none)",
    )
    p.add_argument(
        "--teacher-weight",
        type=float,
        default=0.0,
        help="weight of one teacher row per training pair in the non-English ridges: the translation's "
        "features with the English path's out-of-fold reading of its source as target (0: none)",
    )


def _add_probe_flags(p: argparse.ArgumentParser) -> None:
    """The attention probes', the combiners', the maps' and the run's flags."""
    p.add_argument(
        "--attention",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an attention pool over the backbone's token states as the non-English combiner's third "
        "input (default: on; needs a backbone)",
    )
    p.add_argument(
        "--attention-penalties",
        default="30000,3000",
        metavar="W,V",
        help="the attention probe's L2 penalties on its token weights and its attention query",
    )
    p.add_argument(
        "--attention-human-weight",
        type=float,
        default=0.3,
        help="weight of the pack's non-English human-labelled rows in the attention probe's fit (RTP-LX "
        "rows weigh 1; 0: RTP-LX alone)",
    )
    p.add_argument(
        "--everyday-weight",
        type=float,
        default=EVERYDAY_WEIGHT,
        help="weight per row of the everyday sentences' trainable fit part (ud-sentences/, presumed "
        f"harmless in every language) in the ridges, the non-English combiner and probe (default: "
        f"{EVERYDAY_WEIGHT:g}; 0: left out)",
    )
    p.add_argument(
        "--english-attention",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="an attention pool for English texts too, the English combiner's third input (default: on; "
        "needs a backbone and the non-English texts' own ridges)",
    )
    p.add_argument(
        "--english-attention-penalties",
        default="1000,3000",
        metavar="W,V",
        help="the English probe's L2 penalties on its token weights and its attention query",
    )
    p.add_argument(
        "--english-attention-tasks",
        default="persp-2020,persp-2022",
        help="label definitions of the English rows the English probe is fitted on ('all': every "
        "English training row, at its task weight)",
    )
    p.add_argument(
        "--combiner-splines",
        default="",
        metavar="KEYS",
        help="combiners fitted in the curved form, each input through a cubic spline (comma-separated: "
        "'full' English, 'full:other' the other languages; default: none, all linear)",
    )
    p.add_argument(
        "--weight-rtplx", type=float, help="regression weight of RTP-LX rows (default: TASK_WEIGHTS in train.py)"
    )
    p.add_argument(
        "--web-gen-share",
        type=float,
        default=WEB_GEN_SHARE,
        help="share of the English web-text map's calibration weight carried by model generations",
    )
    p.add_argument(
        "--continuation-gen-share",
        type=float,
        default=CONTINUATION_GEN_SHARE,
        help="share of the English continuation map's calibration weight carried by model generations",
    )
    p.add_argument("--ngram-features", type=int, default=2**17, help="hash buckets of the n-gram part")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--subset", type=float, help="keep this share of text groups (fixed by hash)")
    p.add_argument("--batch-size", type=int, default=32, help="texts per backbone forward pass")
    p.add_argument(
        "--embedding-cache", help="SQLite file of cached embeddings (default: in the polytox cache; 'off' to disable)"
    )
    p.add_argument("--no-baselines", action="store_true", help="skip the lexicon and SVM rows of the card")
    p.add_argument("--plot", help="also draw the reliability diagram (PNG) from the measurements")
    p.add_argument("--no-progress", action="store_true")


def two_numbers(option: str, value: str) -> tuple[float, float]:
    """An option's ``W,V`` pair of penalties."""
    try:
        numbers = [float(x) for x in value.split(",")]
    except ValueError:
        numbers = []
    if len(numbers) != 2:
        raise PolytoxError(f"{option} takes two numbers W,V, got {value!r}")
    return numbers[0], numbers[1]


def write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")

    atomic_write(path, write)


def run(args: argparse.Namespace) -> int:
    from ..scoring.ml.card import DEFAULT_CARD, markdown_card
    from ..scoring.ml.ngrams import NgramConfig
    from ..training.scorer.baselines import lexicon_baseline, svm_baseline
    from ..training.scorer.measurements import measurements
    from ..training.scorer.pool import training_pool
    from ..training.scorer.train import TrainConfig, build_features, select, train

    shared = data_folder(
        args.shared,
        f"train-scorer: give --shared DIR (or {DATA_ENV}), the data folder holding rtp/, rtp-lx/ and scorer-train/",
    )
    langs = tuple(sorted({normalize_lang(x) for v in (args.lang or []) for x in v.split(",") if x})) or PTP_LANGUAGES
    penalties = two_numbers("--attention-penalties", args.attention_penalties)
    en_penalties = two_numbers("--english-attention-penalties", args.english_attention_penalties)
    en_tasks = (
        None
        if args.english_attention_tasks == "all"
        else tuple(x.strip() for x in args.english_attention_tasks.split(",") if x.strip())
    )
    config = TrainConfig(
        shared=str(shared),
        langs=langs,
        backbone=None if args.backbone == "none" else args.backbone,
        layers=tuple(int(x) for x in args.layers.split(",") if x.strip()),
        max_tokens=args.max_tokens,
        ngram=NgramConfig(n_features=args.ngram_features),
        alpha_ngram=args.alpha_ngram,
        alpha_emb=args.alpha_emb,
        task_offsets=args.task_offsets,
        task_weights=not args.no_task_weights,
        human_data=not args.no_human_data,
        split_combiner=args.split_combiner,
        weight_rtplx=args.weight_rtplx,
        other_rtplx_weight=args.other_rtplx_weight or None,
        other_task_offsets=args.other_task_offsets,
        attention=args.attention,
        attention_alpha_w=penalties[0],
        attention_alpha_v=penalties[1],
        attention_human_weight=args.attention_human_weight or None,
        everyday_weight=args.everyday_weight or None,
        consistency_weight=args.consistency_weight or None,
        probe_consistency_weight=args.probe_consistency_weight or None,
        teacher_weight=args.teacher_weight or None,
        english_attention=args.english_attention,
        english_attention_alpha_w=en_penalties[0],
        english_attention_alpha_v=en_penalties[1],
        english_attention_tasks=en_tasks,
        combiner_splines=combiner_splines(args.combiner_splines),
        web_gen_share=args.web_gen_share,
        continuation_gen_share=args.continuation_gen_share,
        folds=args.folds,
        subset=args.subset,
        batch_size=args.batch_size,
        embedding_cache=args.embedding_cache,
    )
    with OutputLock(args.out, kind="file"):  # one writer per head file; refused at once, naming the holder
        started = time.perf_counter()
        examples = select(training_pool(shared, langs, everyday=config.everyday_weight is not None), config)
        baselines: dict[str, Any] = {}
        notes: list[str] = []
        if not args.no_baselines:
            lexicon_dir = shared / "ldnoobw"
            scores, how = lexicon_baseline(examples, lexicon_dir)
            baselines["lexicon"] = scores
            notes.append(f"lexicon: {how}; its values are match rates, not probabilities (MAE/ECE not comparable)")
            svm = svm_baseline(examples)
            if svm is not None:
                baselines["svm"] = svm
            else:
                notes.append("svm: alt-profanity-check not installed, row left out")
        with progress_bar("train", enabled=not args.no_progress) as callback:
            feats = build_features(config, examples, callback)
            result = train(config, examples, progress=callback, feats=feats)
        digest = result.head.save(args.out)
        data = measurements(config, result, feats, baselines, notes)
        data["config"] = config.to_dict()
        data["seconds"] = round(time.perf_counter() - started, 1)
        card_path = Path(args.measurements) if args.measurements else Path(args.out).with_name(DEFAULT_CARD)
        write_text(card_path, json.dumps(data, indent=1, sort_keys=False) + "\n")
        out_console.print(markdown_card(data), markup=False, highlight=False)
        if args.plot:
            from ..training.scorer.reliability_plot import plot_reliability

            console.print(f"reliability diagram: {plot_reliability(data, args.plot)}")
        for note in notes:
            console.print(f"note: {note}")
        size = Path(args.out).stat().st_size
        console.print(
            f"wrote {args.out} ({size / 1024:.0f} KiB, digest {digest}) and {card_path}: "
            f"{result.head.meta['n_train']} training / {result.head.meta['n_heldout']} held-out texts "
            f"in {data['seconds']:.0f} s"
        )
    return 0


def combiner_splines(value: str) -> tuple[str, ...] | None:
    """``--combiner-splines``: the mode-"full" combiner keys to fit curved (None: none)."""
    keys = tuple(k.strip() for k in value.split(",") if k.strip())
    unknown = [k for k in keys if k not in ("full", "full:other")]
    if unknown:
        raise PolytoxError(f"--combiner-splines: unknown combiner(s) {', '.join(unknown)}; known: full, full:other")
    return keys or None
