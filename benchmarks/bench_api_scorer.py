"""What a notebook loop pays per ``polytox.score`` call: the first call (build and load), later calls with
new texts (the kept scorer), the same texts on the scorer object itself (scoring only), and, as the
baseline the kept scorer replaces, a call that builds and closes its own scorer (``polytox.scorer``).

Target (docs/python.md "Keep the scorer loaded"): a later call with new texts costs at most the scoring
time plus 0.1 s. The score cache is off, so every call runs the model. Usage:
python benchmarks/bench_api_scorer.py [--scorer default] [--n 16] [--calls 3] [--opt KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import time

import polytox
from polytox.api import scorers as api_scorers

WORDS = "the park was lovely today and my friend said you are a complete idiot for walking in rain".split()


def texts(n: int, seed: int) -> list[str]:
    words = len(WORDS)
    return [" ".join(WORDS[(seed * 13 + i * 7 + j) % words] for j in range(12)) + f" ({seed}.{i})" for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scorer", default="default")
    parser.add_argument("--n", type=int, default=16, help="texts per call")
    parser.add_argument("--calls", type=int, default=3, help="later calls with new texts")
    parser.add_argument("--opt", action="append", default=[], help="scorer option KEY=VALUE")
    args = parser.parse_args()
    opts = ["cache=off", *args.opt]

    def timed(batch: list[str]) -> float:
        start = time.perf_counter()
        out = polytox.score(batch, scorer=args.scorer, langs="en", options=opts)
        assert all(r.ok for r in out), [r.error for r in out if not r.ok][:3]
        return time.perf_counter() - start

    first = timed(texts(args.n, 0))
    (kept,) = api_scorers._SHARED.values()
    later, scoring = [], []
    for i in range(args.calls):  # interleaved, so a load that drifts on a shared machine hits both alike
        later.append(timed(texts(args.n, 1 + i)))
        batch = texts(args.n, 100 + i)
        start = time.perf_counter()
        kept.score(batch, ["en"] * len(batch))
        scoring.append(time.perf_counter() - start)
    polytox.close_scorers()
    start = time.perf_counter()
    with polytox.scorer(args.scorer, opts) as handle:
        handle.score(texts(args.n, 200), "en")
    rebuilt = time.perf_counter() - start
    print(f"scorer {kept.id}, {args.n} new texts per call, cache off")
    print(f"first call (build + load + score):      {first:7.3f} s")
    print(f"later calls (kept scorer):              {', '.join(f'{t:.3f}' for t in later)} s")
    print(f"scoring only (the scorer object):       {', '.join(f'{t:.3f}' for t in scoring)} s")
    print(f"a call that builds its own (baseline):  {rebuilt:7.3f} s")
    diffs = sorted(a - b for a, b in zip(later, scoring, strict=True))
    print(
        f"later call minus scoring, per pair:     {', '.join(f'{d:+.3f}' for d in diffs)} s "
        f"(median {diffs[len(diffs) // 2]:+.3f}; target <= +0.100)"
    )


if __name__ == "__main__":
    main()
