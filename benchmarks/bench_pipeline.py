"""Pipelined vs serial generate-then-score, on CPU, in one run (ratios are what to read: timings are noisy).

The fake generator sleeps ``gen`` seconds per shard (a stand-in for a GPU busy generating: sleeping
frees the CPU, as a GPU does); the scorer is either the fake scorer sleeping ``score`` seconds per shard
(an API or GPU classifier) or the real English SVM scorer (CPU work in this process). Each row is a fresh
run directory with the score cache off, so nothing is reused between rows.

    python benchmarks/bench_pipeline.py [--shards 10] [--samples 10] [--shard-size 16]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from polytox.executors import ExecutorConfig
from polytox.runner import execute_run as evaluate
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec

SCENARIOS = [  # name, generator seconds per shard, scorer, scorer options
    ("generation-bound (gen 0.20 s, score 0.10 s)", 0.20, "fake", {"delay": "0.10"}),
    ("balanced (gen 0.15 s, score 0.15 s)", 0.15, "fake", {"delay": "0.15"}),
    ("scorer-bound (gen 0.10 s, score 0.20 s)", 0.10, "fake", {"delay": "0.20"}),
    ("real SVM scorer on CPU (gen 0.10 s)", 0.10, "svm", {}),
]


def run_one(tmp: Path, name: str, executor: str, gen: float, scorer: str, opts: dict[str, str],
            args: argparse.Namespace) -> dict[str, float]:
    spec = EvalSpec(
        prompts=PromptSpec(source="demo", langs=("en",) if scorer == "svm" else (),
                           limit=args.shards * args.shard_size),
        generation=GenerationSpec(model="fake", backend="fake", samples=args.samples, max_new_tokens=20,
                                  options=(("delay", str(gen)),)),
        scorer=ScorerSpec(name=scorer, options=tuple(sorted({**opts, "cache": "off",
                                                              **({"batch_size": "100000"} if scorer == "fake"
                                                                 else {})}.items()))),
        shard_size=args.shard_size)
    out = tmp / f"{name[:12]}-{executor}".replace(" ", "_")
    start = time.perf_counter()
    result = evaluate(spec, out, executor=ExecutorConfig(kind=executor))
    wall = time.perf_counter() - start
    stats = json.loads((out / "manifest.json").read_text())["executor"]
    return {"wall": wall, "gen": stats["generate_seconds"], "score": stats["score_seconds"],
            "wait": stats["wait_for_scores_seconds"], "emt": result.metrics["overall"]["emt"] or 0.0,
            "shards": stats["shards_total"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=10)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--shard-size", type=int, default=4)
    args = parser.parse_args()
    print(f"CPU: {os.cpu_count()} cores; {args.shards} shards x {args.shard_size} prompts x K={args.samples}")
    header = (f"| {'scenario':<44} | {'executor':<9} | {'wall s':>6} | {'gen s':>6} | {'score s':>7} | "
              f"{'gen waits for scores s':>22} | {'speed-up':>8} | same EMT |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POLYTOX_CACHE_DIR"] = str(Path(tmp) / "cache")
        run_one(Path(tmp), "warm-up", "serial", 0.0, "fake", {}, args)  # imports, DuckDB, first writes
        for name, gen, scorer, opts in SCENARIOS:
            if scorer == "svm":
                try:
                    import profanity_check  # noqa: F401
                except ImportError:
                    print(f"| {name:<44} | skipped: pip install 'polytox[svm]' |")
                    continue
            rows = {ex: run_one(Path(tmp), name, ex, gen, scorer, opts, args)
                    for ex in ("serial", "pipelined")}
            base = rows["serial"]["wall"]
            for ex, r in rows.items():
                same = "yes" if r["emt"] == rows["serial"]["emt"] else "NO"
                print(f"| {name:<44} | {ex:<9} | {r['wall']:6.2f} | {r['gen']:6.2f} | {r['score']:7.2f} | "
                      f"{r['wait']:22.2f} | {base / r['wall']:7.2f}x | {same:<8} |")


if __name__ == "__main__":
    main()
