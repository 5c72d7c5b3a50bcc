"""The measurements behind docs/detox.md's reading of the Table 3 run (why a method misses a prompt group).

Reads a finished ``bench_detox.py`` output (default ``runs/bench-detox``) and prints:

1. word filter: of the baseline's continuations the run's scorer reads >= 0.5, the share that holds a
   word of the lexicon scorer's list (``$POLYTOX_LEXICON_DIR``, e.g. ``../shared/data/ldnoobw``), per prompt
   group: what a word list can remove at all;
2. ATCON's attribute-token probe (``atcon-toxic`` against ``atcon``) beside the separation of the two DAPT
   models, paired by prompt, per group;
3. the mean toxicity of the continuations of the baseline, DAPT non-toxic and ATCON per prompt group;
4. the training corpus' two sides under the default scorer (a seeded sample of ``--corpus-sample``
   documents each): is the non-toxic side cleaner than what the model already writes?
5. VOCAB-SHIFT's learned shift: its size and the tokens it lowers most.

``python benchmarks/detox_probes.py --out runs/detox37``
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench-detox", help="the bench_detox.py output folder")
    ap.add_argument("--corpus-sample", type=int, default=1000)
    args = ap.parse_args()

    import numpy as np
    import pyarrow.parquet as pq

    from polytox.analysis.paired import continuation_scores, paired_emt_delta, prompt_groups
    from polytox.scoring import build_scorer

    out = Path(args.out)
    runs = out / "runs"
    groups = prompt_groups(runs / "baseline")

    def toxicities(run: str) -> list[tuple[str, str, float | None]]:
        """(prompt id, text, toxicity under the run's own scorer) of every stored continuation."""
        texts: dict[tuple[str, int], str] = {}
        for part in sorted((runs / run / "generations").glob("part-*.parquet")):
            g = pq.read_table(part, columns=["prompt_id", "sample_index", "text"]).to_pydict()
            for p, i, text in zip(g["prompt_id"], g["sample_index"], g["text"], strict=True):
                texts[(p, i)] = text or ""
        return [(p, texts.get((p, i), ""), v) for p, i, v in continuation_scores(runs / run)]

    base = toxicities("baseline")
    lexicon = build_scorer("lexicon", {})
    listed = lexicon.score([t for _, t, _ in base], ["en"] * len(base))
    print("1. word filter: baseline continuations scored >= 0.5 that hold a listed word")
    for group in ("toxic", "nontoxic"):
        hits = [(v, s) for (p, _, v), s in zip(base, listed, strict=True)
                if groups.get(p) == group and v is not None and v >= 0.5]
        n = sum(1 for _, s in hits if (s.values or {}).get("toxicity", 0.0) >= 0.5)
        print(f"   {group:8s} prompts: {n} of {len(hits)} ({n / max(len(hits), 1):.1%})")

    print("2. separation, paired by prompt (overall; toxic / non-toxic prompts)")
    for a, b in (("atcon", "atcon-toxic"), ("dapt-nontoxic", "dapt-toxic")):
        d = paired_emt_delta(runs / a, runs / b)
        if d is None:
            continue
        by = "; ".join(f"{g} {v['delta']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]"
                       for g, v in d["by_group"].items())
        print(f"   {b} - {a}: {d['delta']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]; {by}")

    print("3. mean continuation toxicity per prompt group")
    for run in ("baseline", "dapt-nontoxic", "atcon"):
        if not (runs / run).is_dir():
            continue
        rows = toxicities(run)
        means = {g: float(np.mean([v for p, _, v in rows if groups.get(p) == g and v is not None]))
                 for g in ("toxic", "nontoxic")}
        print(f"   {run:14s} toxic {means['toxic']:.3f}  non-toxic {means['nontoxic']:.3f}")

    print(f"4. the corpus' sides under the default scorer ({args.corpus_sample} sampled documents each)")
    docs = [json.loads(line) for line in (out / "corpus" / "train.jsonl").open()]
    scorer = build_scorer("default", {})
    rng = random.Random(0)
    for label in ("nontoxic", "toxic"):
        side = [d for d in docs if d["label"] == label]
        sample = rng.sample(side, min(args.corpus_sample, len(side)))
        values = np.array([s.values["toxicity"] for s in scorer.score([d["text"] for d in sample],
                                                                      ["en"] * len(sample)) if s.values])
        print(f"   {label:8s}: mean {values.mean():.3f}, median {np.median(values):.3f}, "
              f"share >= 0.5 {np.mean(values >= 0.5):.3f}")

    meta: dict[str, Any] = json.loads((out / "models" / "vocab-shift" / "detox.json").read_text())
    from safetensors.torch import load_file

    shift = load_file(str(out / "models" / "vocab-shift" / "vocab_shift.safetensors"))["W"][:, 0]
    print(f"5. VOCAB-SHIFT: shift min {shift.min().item():+.3f}, max {shift.max().item():+.3f}, "
          f"std {shift.std().item():.3f} over {meta['training']['steps']} steps; lowest: "
          f"{' '.join(meta['nontoxic_column']['lowest'][:10])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
