"""Where a translation's raw output parts from its English source's, per head part (a diagnostic of the
consistency study, log.md "A consistency term in the non-English ridges: results"; it decides nothing).

For the held-out RTP-LX toxicity-preserving pairs (both parts of the cut: nothing is fitted here), each head's
raw logit of a translation minus its English source's splits into the combiners' terms:
``(bias_o - bias_e) + sum_k (w_o,k * part_t,k - w_e,k * part_s,k)`` over the n-gram ridge, the mean-pool ridge
and the attention probe (the non-English texts' own ridges and probe against the English ones). Printed per
language on harmless pairs (both sides' mean rating below 1.5) and toxic pairs (both 3 or more), for each
head given, with the spread across languages (largest minus smallest language mean) per term. ``within``:
each non-English part's translation-minus-source difference with the source read through the same
non-English path, the quantity the consistency term pulls together (mean |d| and correlation).

    python -m research.scorer.consistency_parts --heads src/polytox/data/polytox-ml-head.npz,/tmp/v3/head.npz
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from polytox.scoring.ml.head import MlHead
from polytox.training.scorer.consistency import translation_pairs
from polytox.training.scorer.data import Example
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.pool import training_pool
from polytox.training.scorer.scale_languages import HARMLESS_BELOW, TOXIC_FROM
from polytox.training.scorer.train import TrainConfig, select

from .everyday_trial import raw_outputs

TERMS = ("bias", "ngram", "emb", "probe")


def heldout_pairs(shared: str) -> tuple[list[Example], np.ndarray, np.ndarray]:
    """The held-out RTP-LX texts and their toxicity-preserving (translation, English source) pairs."""
    examples = select(training_pool(shared), TrainConfig(shared=shared))
    held = np.array(heldout_mask(examples), dtype=bool)
    rows = np.array([i for i in np.flatnonzero(held) if examples[i].source == "rtp-lx"], dtype=np.int64)
    lx = [examples[i] for i in rows]
    t, s = translation_pairs(lx, np.arange(len(lx)))
    return lx, t, s


def contributions(head: MlHead, parts: dict[str, np.ndarray], t: np.ndarray, s: np.ndarray) -> dict[str, np.ndarray]:
    """Each combiner term of logit(translation) minus logit(source), per pair (linear combiners only)."""
    other, english = head.combine["full:other"], head.combine["full"]
    if not (isinstance(other, tuple) and isinstance(english, tuple)):
        raise SystemExit("a curved combiner has no per-term split")
    out = {"bias": np.full(len(t), float(other[0]) - float(english[0]))}
    for k, name in enumerate(("ngram", "emb", "probe"), start=1):
        out[name] = float(other[k]) * parts[name][t] - float(english[k]) * parts[name][s]
    return out


def within_path(
    head: MlHead, lx: Sequence[Example], parts: dict[str, np.ndarray], t: np.ndarray, s: np.ndarray, sources: list[int]
) -> dict[str, Any]:
    """Each non-English part's translation-minus-source difference with the source read through the same
    non-English path (what the consistency term pulls together): mean |d| and the correlation, per part."""
    as_other = [replace(lx[i], lang="de") for i in sources]  # any non-English language takes that path
    other = raw_outputs(head, as_other)
    at = {i: k for k, i in enumerate(sources)}
    src = np.array([at[i] for i in s])
    out: dict[str, Any] = {}
    for name in ("ngram", "emb", "probe"):
        a, b = parts[name][t], other[name][src]
        out[name] = {
            "mean_abs": round(float(np.abs(a - b).mean()), 4),
            "corr": round(float(np.corrcoef(a, b)[0, 1]), 4),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shared", default="../shared/data")
    p.add_argument("--heads", required=True, help="comma list of head files")
    p.add_argument("--out", help="write the result (JSON) here")
    args = p.parse_args(argv)
    lx, t, s = heldout_pairs(args.shared)
    rating_t = np.array([lx[i].rating for i in t], dtype=float)
    rating_s = np.array([lx[i].rating for i in s], dtype=float)
    strata = {
        "harmless": (rating_t < HARMLESS_BELOW) & (rating_s < HARMLESS_BELOW),
        "toxic": (rating_t >= TOXIC_FROM) & (rating_s >= TOXIC_FROM),
    }
    langs = np.array([lx[i].lang for i in t])
    result: dict[str, Any] = {"n_pairs": len(t), "strata": {k: int(v.sum()) for k, v in strata.items()}}
    sources = sorted(set(s.tolist()))
    for path in args.heads.split(","):
        head = MlHead.load(path)
        parts = raw_outputs(head, lx)
        terms = contributions(head, parts, t, s)
        block: dict[str, Any] = {"within": within_path(head, lx, parts, t, s, sources)}
        for stratum, sel in strata.items():
            per_lang = {
                lang: {name: round(float(terms[name][sel & (langs == lang)].mean()), 3) for name in TERMS}
                for lang in sorted(set(langs[sel].tolist()))
            }
            spread = {
                name: round(max(v[name] for v in per_lang.values()) - min(v[name] for v in per_lang.values()), 3)
                for name in TERMS
            }
            block[stratum] = {"per_lang": per_lang, "spread": spread}
        result[head.digest] = block
        print(head.digest, json.dumps({k: v.get("spread", v) for k, v in block.items()}))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
