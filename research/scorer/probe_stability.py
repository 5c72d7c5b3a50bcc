"""How far a last-bit change of its inputs moves the attention probe, fitted on the head's fit rows.

A retrain on another machine gets inputs that differ in their last bits (embeddings, sums). A fit that
amplifies such differences makes the head depend on the machine. This trial fits the probe twice per
setting, on the targets as they are and on ``targets * (1 + eps)``, and prints how far ``b``, ``v``, ``w``
and the probe's scores of the fit texts moved. It reads the head's fit rows and their token states as
``train-scorer`` does (the token-state cache; one backbone pass when it is empty); the held-out split is
never read. ``--english`` reads the English probe's fit rows, weights and penalties instead.
docs/trainscorer.md ("The attention probe is the next amplifier") has the figures.

    python -m research.scorer.probe_stability [--shared ../shared/data] [--eps 1e-7] [--english]
        [--fits float32:60,float32:200,float64:500]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from polytox.scoring.ml.attention import AttentionProbe, fit_attention_probe


@dataclass
class Movement:
    """How far one perturbed fit moved from the unperturbed one."""

    seconds: float  # the unperturbed fit's time
    b: float
    v: float
    w: float
    score_max: float
    score_mean: float
    probe: AttentionProbe  # the unperturbed fit


def perturbation(states: np.ndarray, offsets: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                 penalties: tuple[float, float], eps: float, dtype: str, max_iter: int) -> Movement:
    """Fit on ``target`` and on ``target * (1 + eps)``; the largest change of each part, and of the scores."""
    started = time.perf_counter()
    base = fit_attention_probe(states, offsets, target, *penalties, max_iter=max_iter, weight=weight, dtype=dtype)
    seconds = time.perf_counter() - started
    moved = fit_attention_probe(states, offsets, target * (1 + eps), *penalties, max_iter=max_iter, weight=weight,
                                dtype=dtype)
    diff = np.abs(base.score(states, offsets) - moved.score(states, offsets))
    return Movement(seconds=seconds, b=abs(base.b - moved.b), v=float(np.abs(base.v - moved.v).max()),
                    w=float(np.abs(base.w - moved.w).max()), score_max=float(diff.max()),
                    score_mean=float(diff.mean()), probe=base)


def main(argv: list[str] | None = None) -> None:
    from polytox.scoring.ml.head import MlHead, default_head_path
    from polytox.training.scorer.attention_fit import attention_embedder, group_states, non_english_fit
    from polytox.training.scorer.pool import training_pool
    from polytox.training.scorer.train import TrainConfig, english_probe_rows, heldout_mask, pooled_target, select

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default="../shared/data")
    parser.add_argument("--eps", type=float, default=1e-7)
    parser.add_argument("--fits", default="float32:60,float32:200,float64:500", help="dtype:max_iter,...")
    parser.add_argument("--english", action="store_true", help="the English probe (default: the non-English one)")
    args = parser.parse_args(argv)
    config = TrainConfig()
    assert config.backbone is not None
    examples = select(training_pool(args.shared), config)
    train_rows = np.flatnonzero(~np.array(heldout_mask(examples), dtype=bool))
    embedder, folder = attention_embedder(config.backbone, config.layers, config.max_tokens, config.batch_size,
                                          config.embedding_cache)
    head = MlHead.load(default_head_path())
    weight: np.ndarray | None
    if args.english:  # as attention_fit.fit_english_attention: one group, each row at its task's weight
        en_rows, weight = english_probe_rows(config, examples, train_rows)
        rows, _, states, offsets = group_states(embedder, examples, [(en_rows, 1.0)], folder)
        penalties = (config.english_attention_alpha_w, config.english_attention_alpha_v)
        shipped = head.probe_en
    else:
        rows, weight, states, offsets = non_english_fit(embedder, examples, train_rows,
                                                        config.attention_human_weight, folder)
        penalties = (config.attention_alpha_w, config.attention_alpha_v)
        shipped = head.probe
    embedder.close()
    target = pooled_target(examples, rows, config.index_mean_weight)
    print(f"{len(rows)} fit texts, {len(states)} tokens; eps {args.eps}")
    print("| probe fit | fit s | moves b | moves v | moves w | moves scores (max / mean) | the shipped probe |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for item in args.fits.split(","):
        dtype, _, iters = item.partition(":")
        m = perturbation(states, offsets, target, weight, penalties, args.eps, dtype, int(iters))
        same = shipped is not None and shipped.b == m.probe.b and np.array_equal(shipped.v, m.probe.v)
        print(f"| {dtype}, up to {iters} iterations | {m.seconds:.0f} | {m.b:.1e} | {m.v:.1e} | {m.w:.1e} | "
              f"{m.score_max:.1e} / {m.score_mean:.1e} | {'reproduced' if same else f'b {m.probe.b:.4f}'} |",
              flush=True)


if __name__ == "__main__":
    main()
