"""Does bfloat16 move the scorer's AUC? The same labelled texts scored by ``polytox-ml`` (full) twice.

Once with the backbone in float32 and once in bfloat16 (same head, same n-grams), on real labelled texts:

- English web text and model continuations with Perspective TOXICITY (``scorer-train/en-perspective.jsonl``,
  rows of kind continuation/generation; toxic = Perspective >= 0.5);
- RTP-LX prompts in PTP's languages rated by humans (toxic = mean rating >= 3), a seeded sample.

Prints AUC per set for both dtypes, their difference (the issue's bound: 0.002), the largest score
difference, and texts/s of each pass. Usage:
python benchmarks/bench_scorer_bf16.py [--n 400] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from sklearn.metrics import roc_auc_score

from polytox.scoring.ml.scorer import PolytoxMlScorer
from polytox.training.scorer.data import load_rtplx

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def labelled_sets(n: int, seed: int) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
    """name -> (texts, langs, binary labels), ``n`` seeded rows each."""
    rng = random.Random(seed)
    with open(DATA / "scorer-train" / "en-perspective.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    conts = [r for r in rows if r["kind"] in ("continuation", "generation")]
    conts = rng.sample(conts, min(n, len(conts)))
    lx = load_rtplx(DATA / "rtp-lx")
    lx = rng.sample(lx, min(n, len(lx)))
    return {
        "en continuations (Perspective >= 0.5)": ([r["text"] for r in conts], ["en"] * len(conts),
                                                  np.array([r["perspective"] >= 0.5 for r in conts])),
        "RTP-LX, 17 languages (human >= 3)": ([e.text for e in lx], [e.lang for e in lx],
                                             np.array([e.label for e in lx])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = labelled_sets(args.n, args.seed)
    table = Table(title=f"polytox-ml (full), float32 vs bfloat16 backbone; {args.n} texts per set; "
                        f"torch threads {torch.get_num_threads()}")
    for col in ("set", "texts", "toxic", "AUC fp32", "AUC bf16", "delta", "max |score diff|", "fp32 texts/s",
                "bf16 texts/s"):
        table.add_column(col, justify="left" if col == "set" else "right")
    for name, (texts, langs, labels) in sets.items():
        probs: dict[str, np.ndarray] = {}
        rates: dict[str, float] = {}
        for dtype in ("float32", "bfloat16"):
            scorer = PolytoxMlScorer(dtype=dtype)
            scorer.score_batch(texts[:1], langs[:1])  # load the backbone outside the timing
            started = time.perf_counter()
            scores = scorer.score_batch(texts, langs)
            rates[dtype] = len(texts) / (time.perf_counter() - started)
            probs[dtype] = np.array([s.values["toxicity"] for s in scores])
            scorer.close()
        auc32 = roc_auc_score(labels, probs["float32"])
        auc16 = roc_auc_score(labels, probs["bfloat16"])
        table.add_row(name, str(len(texts)), str(int(labels.sum())), f"{auc32:.4f}", f"{auc16:.4f}",
                      f"{auc16 - auc32:+.4f}", f"{np.abs(probs['float32'] - probs['bfloat16']).max():.4f}",
                      f"{rates['float32']:.1f}", f"{rates['bfloat16']:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
