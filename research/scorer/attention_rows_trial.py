"""Which rows the attention probe is fitted on, measured on the TRAINING split only.

The probe first measured (``attention_trial``) was fitted on RTP-LX alone. Inside the head it lifted the
RTP-LX per-language AUC, but the pack's non-English human-labelled sources (COLD, GermEval, KoCoHub,
MLMA, ToLD-Br, ...) ranked worse than without it: the combiner learned to trust a reading tuned to
RTP-LX's translated prompts. This trial fits the probe on RTP-LX (weight 1) plus those pack rows at a few
weights, and reads the head's own pipeline out of fold (``train.cross_validate``, its folds, the probe's
fold scores as the non-English combiner's third input) on both kinds of rows:

- RTP-LX training rows: AUC against the human label per language, mean and lowest;
- the pack's non-English human-labelled training rows: AUC against each source's own label, and the mean
  over the real sources (the ``templates-*`` sources are synthetic phrases, reported but not averaged).

Fold probes score the rows from their token states (cached like ``train-scorer``'s). The held-out split is
never read. About 5 minutes per weight on 2 CPU cores once the token states are cached.

    python -m research.scorer.attention_rows_trial --out research/scorer/results/trainscorer-attention-rows.json
    python -m research.scorer.attention_rows_trial --markdown research/scorer/results/trainscorer-attention-rows.json
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from polytox.scoring.ml.embed_cache import default_embedding_cache_path
from polytox.scoring.ml.embedder import HiddenStateEmbedder
from polytox.training.scorer.attention_fit import (
    AttentionScores,
    fit_row_groups,
    fold_probes,
    fold_scores,
    group_states,
)
from polytox.training.scorer.measure import auc
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.train import TrainConfig, build_features, cross_validate, make_folds, pooled_target, select
from research.scorer.attention_trial import language_aucs, trial_cli

WEIGHTS: tuple[float | None, ...] = (None, 0.1, 0.3, 1.0)  # None: RTP-LX alone


def source_aucs(labels: np.ndarray, scores: np.ndarray, sources: np.ndarray) -> dict[str, Any]:
    """AUC per source and the mean over the real (non-template) sources."""
    per = {str(s): auc(labels[sources == s], scores[sources == s]) for s in sorted(set(sources.tolist()))}
    known = {k: round(v, 4) for k, v in per.items() if v is not None}
    real = [v for k, v in known.items() if not k.startswith("templates")]
    return {"real_mean": round(float(np.mean(real)), 4), "sources": known}


def run(config: TrainConfig, weights: Sequence[float | None] = WEIGHTS) -> dict[str, Any]:
    t0 = time.time()
    examples = select(training_pool(config.shared), config)
    heldout = np.array(heldout_mask(examples), dtype=bool)
    train_rows = np.flatnonzero(~heldout)
    feats = build_features(config, examples)
    folds = make_folds(config, examples, train_rows)
    labels = np.array([e.label for e in examples], dtype=bool)
    langs = np.array([e.lang for e in examples])
    sources = np.array([e.source for e in examples])
    lx = (sources == "rtp-lx") & ~heldout
    pack = np.array([e.domain == "human" for e in examples]) & (langs != "en") & ~heldout
    assert config.backbone is not None
    embedder = HiddenStateEmbedder(config.backbone, config.layers, max_tokens=config.max_tokens,
                                   batch_size=config.batch_size)
    # RTP-LX (weight 1), then the pack's non-English human rows
    rows_all, _, states, offsets = group_states(embedder, examples, fit_row_groups(examples, train_rows, 1.0),
                                                default_embedding_cache_path().parent)
    is_lx = sources[rows_all] == "rtp-lx"
    position = np.full(len(examples), -1)
    position[rows_all] = np.arange(len(rows_all))
    print(f"{len(rows_all)} texts, {len(states)} tokens ({time.time() - t0:.0f} s)", file=sys.stderr)

    def read(combined: np.ndarray) -> dict[str, Any]:
        return {"rtp-lx": language_aucs(labels[lx], combined[lx], langs[lx]),
                "pack": source_aucs(labels[pack], combined[pack], sources[pack])}

    out: dict[str, Any] = {"no probe": read(cross_validate(config, examples, feats, train_rows)[0]["full"])}
    for weight in weights:
        probes = fold_probes(states, offsets, position, rows_all if weight is not None else rows_all[is_lx], folds,
                             lambda rows: pooled_target(examples, rows, config.index_mean_weight),
                             (config.attention_alpha_w, config.attention_alpha_v),
                             None if weight is None else np.where(is_lx, 1.0, weight), final=False)
        oof = fold_scores(probes, folds, rows_all[langs[rows_all] != "en"], position, states, offsets, len(examples))
        feats.attention = AttentionScores(probe=probes[-1], oof=oof, final=np.full(len(examples), np.nan),
                                          folds=folds)
        name = "probe on RTP-LX alone" if weight is None else f"probe on RTP-LX + pack rows at weight {weight:g}"
        out[name] = read(cross_validate(config, examples, feats, train_rows)[0]["full"])
        feats.attention = None
        print(f"{name} ({time.time() - t0:.0f} s)", file=sys.stderr)
    return {"n_rtplx": int(lx.sum()), "n_pack": int(pack.sum()), "folds": config.folds,
            "penalties": [config.attention_alpha_w, config.attention_alpha_v],
            "note": "out of fold on the training split (the head's folds); the held-out split is not read; "
                    "fold probes score rows from their token states", "variants": out,
            "seconds": round(time.time() - t0, 1)}


def markdown(data: dict[str, Any]) -> str:
    lines = ["| the head's pipeline, out of fold on the training split | RTP-LX mean | RTP-LX min | pack real sources "
             "mean | " + " | ".join(next(iter(data["variants"].values()))["pack"]["sources"]) + " |",
             "| --- | ---: | ---: | ---: |" + " ---: |" * len(next(iter(data["variants"].values()))["pack"]["sources"])]
    for name, m in data["variants"].items():
        lines.append(f"| {name} | {m['rtp-lx']['mean']:.3f} | {m['rtp-lx']['min']:.3f} ({m['rtp-lx']['min_lang']}) | "
                     f"{m['pack']['real_mean']:.3f} | " + " | ".join(f"{v:.3f}" for v in m["pack"]["sources"].values())
                     + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return trial_cli(argv, __doc__ or "", run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
