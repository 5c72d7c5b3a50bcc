"""One value per text? A scorer called in one batch, in batches of 5, alone, and from several threads.

Scores N seeded texts (half English with Perspective scores, half human-labelled texts in other languages,
``../shared/data/scorer-train``) with a scorer (default: ``default``, cache off) and prints:

- texts/s of one call over all N, of sequential calls of 5, and of ``--threads`` threads making calls of 5;
- the largest difference between calls of 5 and the one call, and between texts scored alone (the first
  60) and the one call;
- the threaded run's crashed texts (``SCORER_CRASHED``) and its largest difference from the same calls of 5
  made sequentially (0 when the scorer is thread-safe).

Texts in a language the scorer does not cover are errors in every pass and are left out of the
differences. docs/scorer-speed.md ("One value per text") has the measured numbers. Usage:
python benchmarks/bench_scorer_threads.py [--n 240] [--threads 4] [--scorer default] [--opt KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from polytox.scoring import build_scorer
from polytox.types import Score

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scorer-train"


def texts_of(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    rows = []
    for name in ("en-perspective.jsonl", "multilingual-human.jsonl"):
        lines = (DATA / name).read_text(encoding="utf-8").splitlines()
        rows += [json.loads(line) for line in rng.sample(lines, n // 2)]
    return [r["text"] for r in rows], [r.get("lang", "en") for r in rows]


def values(scores: list[Score]) -> np.ndarray:
    return np.array([s.get("toxicity") if s.ok else np.nan for s in scores], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=240)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--scorer", default="default")
    parser.add_argument("--opt", nargs="*", default=[], help="scorer options KEY=VALUE (cache=off is added)")
    args = parser.parse_args()
    texts, langs = texts_of(args.n)
    n = len(texts)
    scorer = build_scorer(args.scorer, {"cache": "off", **dict(o.split("=", 1) for o in args.opt)})
    scorer.score(texts[:4], langs[:4])  # loads the model
    print(f"{scorer.id}: {n} texts, languages {', '.join(sorted(set(langs)))}")

    started = time.perf_counter()
    whole = values(scorer.score(texts, langs))
    print(f"one call of {n}: {n / (time.perf_counter() - started):.1f} texts/s")
    starts = range(0, n, 5)
    started = time.perf_counter()
    fives = np.concatenate([values(scorer.score(texts[i : i + 5], langs[i : i + 5])) for i in starts])
    print(f"sequential calls of 5: {n / (time.perf_counter() - started):.1f} texts/s; "
          f"max |diff| vs one call {np.nanmax(np.abs(fives - whole)):.3g}")
    m = min(n, 60)
    alone = np.array([values(scorer.score([texts[i]], [langs[i]]))[0] for i in range(m)])
    print(f"alone (first {m}): max |diff| vs one call {np.nanmax(np.abs(alone - whole[:m])):.3g}")

    started = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        threaded = list(pool.map(lambda i: scorer.score(texts[i : i + 5], langs[i : i + 5]), starts))
    seconds = time.perf_counter() - started
    flat = [s for call in threaded for s in call]
    crashed = sum(1 for s in flat if s.error and s.error.startswith("SCORER_CRASHED"))
    diff = np.abs(values(flat) - fives)
    print(f"{args.threads} threads, calls of 5: {n / seconds:.1f} texts/s; crashed {crashed} of {n}; "
          f"max |diff| vs the same calls made sequentially "
          f"{np.nanmax(diff) if np.isfinite(diff).any() else float('nan'):.3g}")
    scorer.close()


if __name__ == "__main__":
    main()
