"""Reading a run at the speed of its metrics: ``polytox metrics RUN`` and ``polytox leaderboard`` end to end.

Builds (once, then reuses) M runs of P prompts x K continuations with the real ``polytox eval`` (fake model
``fake:mI``, fake scorer, the default shard size), and one large run of ``--big-prompts`` x K rows written
by the library's run writer (``bench_metrics.synthesize``, the runner's default part size). Then times each
command as a fresh process (interpreter start and imports included), in one run:

- before: the code given by ``--before-src`` (e.g. a checkout of the previous commit,
  ``../polytox-before/src``);
- after, first read: this checkout with every run's ``derived/`` removed (distinct-n, metrics and paired
  ΔEMT computed and kept);
- after, kept: this checkout again (what every later call costs);
- after, kept, without the damage check: the same with ``RunStore.check_readable`` reduced to reading the
  manifest (the per-part checksum pass that is being made cheap separately).

    python benchmarks/bench_read_path.py --before-src ../polytox-before/src            # 10 x 20,000 x 25 + 100,000 x 25
    python benchmarks/bench_read_path.py --prompts 2000 --runs 3 --big-prompts 10000   # a quick check

Targets (issue 64): metrics of a 2.5M-row run <= 2 s, leaderboard over ten 500K-row runs <= 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
LANGS = ("en", "de", "hi", "ru", "id")

# A command run as a fresh process; NO_VERIFY reduces the damage check to reading the manifest.
LAUNCH = """
import os, sys
from polytox.store import RunStore
if os.environ.get("BENCH_NO_VERIFY"):
    RunStore.check_readable = lambda self, scorer_id=None: self.manifest()
from polytox.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def build_runs(root: Path, n_runs: int, n_prompts: int, k: int) -> list[Path]:
    """M runs over the same P prompts with the real ``polytox eval`` (kept and reused when finished)."""
    root.mkdir(parents=True, exist_ok=True)
    prompts = root / f"prompts-{n_prompts}.jsonl"
    if not prompts.exists():
        rng = random.Random(0)
        with prompts.open("w") as fh:
            for i in range(n_prompts):
                words = " ".join(rng.choice(("river", "market", "idiot", "tea", "bread")) for _ in range(4))
                fh.write(json.dumps({"id": f"p{i:06d}", "text": f"prompt {i} about {words}",
                                     "lang": LANGS[i % len(LANGS)], "toxicity": round(rng.random(), 4)}) + "\n")
    runs = []
    for i in range(n_runs):
        out = root / f"run-{n_prompts}x{k}-m{i}"
        if not (out / "metrics.json").exists():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", LAUNCH, "eval", "--prompts", str(prompts),
                            "--model", f"fake:m{i}", "--scorer", "fake", "-k", str(k), "--out", str(out),
                            "--no-progress", "--json"], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONPATH": str(SRC)})
            print(f"built {out.name} in {time.perf_counter() - t0:.0f} s", flush=True)
        runs.append(out)
    return runs


def build_big(root: Path, n_prompts: int, k: int) -> Path:
    out = root / f"big-{n_prompts}x{k}"
    if not (out / "manifest.json").exists() or not (out / "scores").exists():
        sys.path.insert(0, str(HERE))
        from bench_metrics import synthesize

        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        synthesize(out, n_prompts, k, shard_size=32)
        print(f"built {out.name} in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def timed(src: Path, argv: list[str], no_verify: bool = False) -> float:
    """Wall seconds of one fresh ``polytox`` process over ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    env.pop("BENCH_NO_VERIFY", None)
    if no_verify:
        env["BENCH_NO_VERIFY"] = "1"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", LAUNCH, *argv], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def forget(runs: list[Path]) -> None:
    for run in runs:
        shutil.rmtree(run / "derived", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=20_000, help="prompts per leaderboard run")
    parser.add_argument("--runs", type=int, default=10, help="leaderboard runs")
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--big-prompts", type=int, default=100_000, help="prompts of the large metrics run")
    parser.add_argument("--root", default="/tmp/polytox-read-path", help="where the runs are built and kept")
    parser.add_argument("--before-src", help="the code to compare against (a checkout's src/); omitted: no 'before'")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions of each 'after' (fastest kept)")
    args = parser.parse_args()

    root = Path(args.root)
    runs = build_runs(root, args.runs, args.prompts, args.samples)
    big = build_big(root, args.big_prompts, args.samples)
    small = runs[0]
    board = ["leaderboard", *map(str, runs)]
    steps = [
        (f"metrics RUN ({args.prompts * args.samples:,} rows)", ["metrics", str(small), "--json"], [small], None),
        (f"metrics RUN ({args.big_prompts * args.samples:,} rows)", ["metrics", str(big), "--json"], [big], 2.0),
        (f"leaderboard ({args.runs} x {args.prompts * args.samples:,} rows)", board, runs, 5.0),
    ]
    header = ("| command | before | after, first read | after, kept | after, kept, no damage check | target |\n"
              "|---|---:|---:|---:|---:|---:|")
    lines = []
    for label, argv, touched, target in steps:
        before = f"{timed(Path(args.before_src), argv):.2f}" if args.before_src else "-"
        forget(touched)
        first = timed(SRC, argv)
        kept = min(timed(SRC, argv) for _ in range(args.repeat))
        bare = min(timed(SRC, argv, no_verify=True) for _ in range(args.repeat))
        goal = "-" if target is None else f"<= {target:g}"
        lines.append(f"| {label} | {before} | {first:.2f} | {kept:.2f} | {bare:.2f} | {goal} |")
        print(lines[-1], flush=True)
    load = os.getloadavg()
    print(f"\nseconds, wall, one fresh process each (interpreter start and imports included); "
          f"{os.cpu_count()} CPU(s), load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n")
    print(header)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
