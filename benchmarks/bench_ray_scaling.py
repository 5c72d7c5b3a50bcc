"""Ray Data executor scaling from 1 to 2 generation workers on a local CPU Ray, in one run.

The fake generator sleeps ``--gen`` seconds per shard, standing in for one GPU's generation time per
shard: sleeping workers do not compete for this machine's cores, so the table shows what the executor
itself adds (scheduling, serialisation, the driver's writes) and how it scales when each worker has its
own accelerator. The local pipelined executor is the single-process baseline. Fixed costs, paid once
per ``polytox eval``, are reported apart from the steady state: Ray's start-up, then the time to the
first finished shard (actor processes start, import polytox, build the backend).

    python benchmarks/bench_ray_scaling.py [--shards 24] [--gen 0.5]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=24)
    parser.add_argument("--shard-size", type=int, default=4)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--gen", type=float, default=0.5, help="generator seconds per shard")
    parser.add_argument("--score", type=float, default=0.05, help="scorer seconds per shard")
    args = parser.parse_args()
    spec = EvalSpec(prompts=PromptSpec(source="demo", limit=args.shards * args.shard_size),
                    generation=GenerationSpec(model="fake", backend="fake", samples=args.samples,
                                              max_new_tokens=20, options=(("delay", str(args.gen)),)),
                    scorer=ScorerSpec(name="fake", options=(("batch_size", "100000"), ("cache", "off"),
                                                            ("delay", str(args.score)))),
                    shard_size=args.shard_size)
    configs = [("local pipelined", ExecutorConfig(kind="pipelined")),
               ("ray, 1 gen worker", ExecutorConfig(kind="ray", gen_workers=1, cpus_per_worker=0.5)),
               ("ray, 2 gen workers", ExecutorConfig(kind="ray", gen_workers=2, cpus_per_worker=0.5))]
    n_gen = args.shards * args.shard_size * args.samples
    print(f"CPU: {os.cpu_count()} cores; {args.shards} shards, {n_gen} generations; "
          f"generator {args.gen} s/shard, scorer {args.score} s/shard; ideal 1 worker: "
          f"{args.shards * args.gen:.1f} s")
    print("| executor           | wall s | Ray start s | to 1st shard s | steady s | shards/s steady | "
          "vs 1 ray worker | same metrics |")
    print("|--------------------|--------|-------------|----------------|----------|-----------------|"
          "-----------------|--------------|")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POLYTOX_CACHE_DIR"] = str(Path(tmp) / "cache")
        for name, config in configs:
            out = Path(tmp) / name.replace(" ", "_").replace(",", "")
            marks: list[float] = []

            def mark(stage: str, done: int, total: int, marks: list[float] = marks) -> None:
                marks.append(time.perf_counter())

            start = time.perf_counter()
            result = evaluate(spec, out, executor=config, progress=mark)
            wall = time.perf_counter() - start
            details = json.loads((out / "manifest.json").read_text())["executor"]["details"]
            ray_start = float(details.get("ray_init_seconds", 0.0))
            first = marks[0] - start - ray_start
            steady = marks[-1] - marks[0]  # the first shard's end to the last shard's end
            results[name] = (wall, ray_start, first, steady, (len(marks) - 1) / steady,
                             result.metrics["overall"])
        base = results["ray, 1 gen worker"][4]
        ref = results["local pipelined"][5]
        for name, (wall, ray_start, first, steady, rate, overall) in results.items():
            print(f"| {name:<18} | {wall:6.2f} | {ray_start:11.2f} | {first:14.2f} | {steady:8.2f} | "
                  f"{rate:15.2f} | {rate / base:14.2f}x | {'yes' if overall == ref else 'NO':<12} |")
    print(f"ideal steady rate: {1 / args.gen:.2f} shards/s per worker")

if __name__ == "__main__":
    main()
