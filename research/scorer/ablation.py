"""What each modelling choice buys: the same measurements, out-of-fold on the TRAINING split only.

Choices (task offsets, task weights, the pack's human data, each calibration map's weight on model
generations, ridge penalties, the non-English ridges, the attention probes; each in both modes, so the
hidden-state part too) are compared by grouped cross-validation inside the training split, so the held-out
split stays untouched by every choice. Each variant is one ``TrainConfig`` change from the default (a few
combine two, named so); the n-gram counts and embeddings are computed once and shared (the counts once per
hashing config, for the bucket variants), and so are the attention probes wherever a variant leaves their
inputs as they were (``variant_probes``).

    python -m research.scorer.ablation --out research/scorer/results/trainscorer-ablation.json
    python -m research.scorer.ablation --markdown research/scorer/results/trainscorer-ablation.json   # the docs' tables
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from polytox.scoring.ml.card import POOLED_RUN
from polytox.scoring.ml.ngrams import NgramConfig, hashed_counts
from polytox.training.scorer.attention_fit import AttentionScores
from polytox.training.scorer.measure import card_summary, measure_scorer
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import (
    Features,
    TrainConfig,
    attention_scores,
    build_features,
    cross_validate,
    oof_calibrated,
    reads_english_probe,
    select,
)

VARIANTS: dict[str, dict[str, Any]] = {
    "chosen": {},
    "no English attention probe (head version 4)": {"english_attention": False},
    "no attention probe (head version 3)": {"attention": False, "english_attention": False},
    "own combiner for non-English texts": {"split_combiner": True},
    "task offsets": {"task_offsets": True},
    "task offsets, continuation map: generations 80%": {"task_offsets": True, "continuation_gen_share": 0.8},
    "task offsets, continuation map: generations only": {"task_offsets": True, "continuation_gen_share": 1.0},
    "no task offsets in the non-English ridges": {"other_task_offsets": False},
    "no task weights": {"task_weights": False},
    "no pack human data": {"human_data": False},
    "one English map, generations 50% (head version 2)": {"web_gen_share": 0.5, "continuation_gen_share": 0.5},
    "web map: generations 10%": {"web_gen_share": 0.1},
    "continuation map: generations 80%": {"continuation_gen_share": 0.8},
    "continuation map: generations only": {"continuation_gen_share": 1.0},
    "RTP-LX weight 3": {"weight_rtplx": 3.0},
    "RTP-LX weight 2": {"weight_rtplx": 2.0},
    "pack human weight 0.5": {"weight_human": 0.5},
    "model generations weight 1": {"weight_generations": 1.0},
    "n-gram ridge alpha 0.5": {"alpha_ngram": 0.5},
    "embedding ridge alpha 300": {"alpha_emb": 300.0},
    "embedding ridge alpha 3000": {"alpha_emb": 3000.0},
    "no own ridges for non-English texts": {"other_rtplx_weight": None},
    "non-English own ridges, RTP-LX weight 6": {"other_rtplx_weight": 6.0},
    "non-English ridges fitted on RTP-LX only": {"other_fit_tasks": ("rtp-lx",)},
    "non-English ridges on RTP-LX only, embedding alpha 10000": {"other_fit_tasks": ("rtp-lx",),
                                                                 "other_alpha_emb": 10000.0},
    "non-English ridges on RTP-LX only, embedding alpha 30000": {"other_fit_tasks": ("rtp-lx",),
                                                                 "other_alpha_emb": 30000.0},
    "non-English ridges on RTP-LX and human data, embedding alpha 10000": {
        "other_fit_tasks": ("rtp-lx", "human:"), "other_alpha_emb": 10000.0},
    "n-gram buckets 2^18": {"ngram": NgramConfig(n_features=2**18)},
    "n-gram buckets 2^19": {"ngram": NgramConfig(n_features=2**19)},
    "n-gram buckets 2^20": {"ngram": NgramConfig(n_features=2**20)},
}


def subset_features(feats: Features, rows: np.ndarray) -> Features:
    return Features(counts=feats.counts[rows], emb=None if feats.emb is None else feats.emb[rows],
                    tasks=feats.tasks[rows], task_names=feats.task_names)


def oof_measure(config: TrainConfig, examples: Sequence[Any], feats: Features, heldout: np.ndarray
                ) -> dict[str, Any]:
    """Card numbers of every mode from calibrated out-of-fold predictions on the training split."""
    train_rows = np.flatnonzero(~heldout)
    combined, _, folds = cross_validate(config, examples, feats, train_rows)
    out: dict[str, Any] = {}
    for mode, values in combined.items():
        pred = oof_calibrated(config, examples, values, folds)
        measured = measure_scorer(examples, ~heldout, pred)
        pooled = next((r for r in measured["run"] if r["model"] == POOLED_RUN), None)
        # the real-run check: EMT / EP / AT of the training split's model continuations, every (model, prompt)
        # pair one prompt, scored out-of-fold vs their stored Perspective scores
        run = {k: pooled[k] for k in pooled if k.endswith(("_diff", "_diff_ci")) or k == "n_prompts"} if pooled else {}
        out[mode] = {**card_summary(measured), "run": run}
    return out


def variant_probes(config: TrainConfig, examples: Sequence[Any], heldout: np.ndarray, rows: np.ndarray,
                   fitted: dict[tuple[Any, ...], AttentionScores], english: bool = False) -> AttentionScores:
    """The attention probes ``train-scorer`` would fit for this variant (``train.attention_scores``; the
    English ones with ``english``), fitted once per distinct input: the examples, the folds, the probe's
    penalties, fit rows, row weights and target."""
    if english:
        key: tuple[Any, ...] = ("en", rows.tobytes(), config.folds, config.english_attention_alpha_w,
                                config.english_attention_alpha_v, config.english_attention_tasks, config.task_weights,
                                config.weight_generations, config.weight_human, config.weight_rtplx)
    else:
        key = (rows.tobytes(), config.folds, config.attention_alpha_w, config.attention_alpha_v,
               config.attention_human_weight, config.index_mean_weight)
    if key not in fitted:
        fitted[key] = attention_scores(config, examples, np.flatnonzero(~heldout), english=english)
    return fitted[key]


def cached_only(config: TrainConfig, examples: list[Any]) -> list[Any]:
    """The examples whose embeddings are all in the cache (exploratory runs while extraction goes on)."""
    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import model_key
    from polytox.types import text_hash

    assert config.backbone is not None
    cache = EmbeddingCache(config.embedding_cache)
    key = model_key(config.backbone, config.max_tokens)
    hashes = [text_hash(e.text) for e in examples]
    have = set(cache.get_many(key, max(config.layers), list(dict.fromkeys(hashes))))
    cache.close()
    return [e for e, h in zip(examples, hashes, strict=True) if h in have]


def run(config: TrainConfig, variants: dict[str, dict[str, Any]], only_cached: bool = False) -> dict[str, Any]:
    everything = select(training_pool(config.shared, config.langs), replace(config, human_data=True))
    heldout_all = np.array(heldout_mask(everything), dtype=bool)  # the split of the full pool, for every variant
    if only_cached and config.backbone is not None:
        have = {id(e) for e in cached_only(config, everything)}
        keep_rows = np.array([id(e) in have for e in everything])
        everything = [e for e, k in zip(everything, keep_rows, strict=True) if k]
        heldout_all = heldout_all[keep_rows]
        print(f"{len(everything)} examples with cached embeddings", flush=True)
    feats_all = build_features(config, everything)
    counts = {config.ngram: feats_all.counts}  # n-gram counts per hashing config (variants may change it)
    probes: dict[tuple[Any, ...], AttentionScores] = {}
    results: dict[str, Any] = {}
    for name, change in variants.items():
        started = time.perf_counter()
        variant = replace(config, **change)
        keep = np.array([variant.human_data or e.domain != "human" for e in everything])
        rows = np.flatnonzero(keep)
        examples = [everything[i] for i in rows]
        if variant.ngram not in counts:
            counts[variant.ngram] = hashed_counts([e.text for e in everything], variant.ngram)
        feats = subset_features(replace(feats_all, counts=counts[variant.ngram]), rows)
        if variant.attention and feats.emb is not None:  # as train-scorer: the probes, out of fold
            feats.attention = variant_probes(variant, examples, heldout_all[rows], rows, probes)
        if reads_english_probe(variant, feats):
            feats.attention_en = variant_probes(variant, examples, heldout_all[rows], rows, probes, english=True)
        recorded = {k: v.to_dict() if isinstance(v, NgramConfig) else v for k, v in change.items()}
        results[name] = {"change": recorded, **oof_measure(variant, examples, feats, heldout_all[rows]),
                         "seconds": round(time.perf_counter() - started, 1)}
        print(name, json.dumps(results[name]), flush=True)
    return {"config": config.to_dict(), "variants": results, "n_examples": len(everything),
            "note": "out-of-fold on the training split (grouped 5-fold); the held-out split is not used"}


def markdown_tables(data: Mapping[str, Any]) -> str:
    """One card-style Markdown table per mode (full, ngram), one row per variant."""
    from polytox.scoring.ml.card import markdown_card

    modes = dict.fromkeys(m for v in data["variants"].values() for m in v if m not in ("change", "seconds"))
    return "\n\n".join(f"Mode `{mode}`:\n\n" + markdown_card(
        {"card": {name: v[mode] for name, v in data["variants"].items() if mode in v}})
        + "\n\n" + run_table(data, mode) for mode in modes)


def run_table(data: Mapping[str, Any], mode: str) -> str:
    """Per variant: the scorer-minus-Perspective EMT / EP / AT of the training split's real run, with CIs."""
    from polytox.scoring.ml.card import diff_with_ci

    lines = ["| variant | pairs | EMT diff [95% CI] | EP diff [95% CI] | AT diff [95% CI] |",
             "| --- | ---: | --- | --- | --- |"]
    for name, v in data["variants"].items():
        run = v.get(mode, {}).get("run")
        if run:
            cells = [diff_with_ci(run[k + "_diff"], run.get(k + "_diff_ci")) for k in ("emt", "ep", "at")]
            lines.append(f"| {name} | {run['n_prompts']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", help="run every variant and write the measurements here (JSON)")
    what.add_argument("--markdown", metavar="JSON", help="print the tables of a measurement file and exit")
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--backbone", default="gemma-3-270m", help="'none' for the n-gram part alone")
    p.add_argument("--only", action="append", help="run only these variants")
    p.add_argument("--cached-only", action="store_true",
                   help="use only texts whose embeddings are cached (exploration while extraction runs)")
    args = p.parse_args(argv)
    if args.markdown:
        print(markdown_tables(json.loads(Path(args.markdown).read_text(encoding="utf-8"))))
        return 0
    config = TrainConfig(shared=args.shared, backbone=None if args.backbone == "none" else args.backbone)
    variants = {k: v for k, v in VARIANTS.items() if not args.only or k in args.only}
    data = run(config, variants, args.cached_only)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
