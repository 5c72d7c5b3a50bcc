"""The damage check a reader runs before reading a run (``RunStore.check_readable``): its cost on the first
read of a run (every part hashed: what every read cost before readers remembered verified parts) and on
later reads (parts unchanged since they matched their checksum are not hashed again, ``_util.verified``),
beside ``--verify``'s full pass and the bare SHA-256 of every file.

Builds a real run with ``polytox eval --model fake --scorer fake`` (N prompts x K samples, the runner's
default shard size), once, under ``--root``; then times each check ``--repeat`` times and prints the
median, in a fresh cache folder for the first read.

    python benchmarks/bench_verify.py                         # 20,000 prompts x 25 (500K rows)
    python benchmarks/bench_verify.py --prompts 2000 --samples 5   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from polytox._util.checksum import file_sha256
from polytox.store import RunStore


def build(run: Path, n_prompts: int, samples: int) -> float:
    """The run (made once); returns the seconds it took (0 when it was there)."""
    if (run / "metrics.json").exists():
        return 0.0
    run.parent.mkdir(parents=True, exist_ok=True)
    prompts = run.parent / f"prompts-{n_prompts}.jsonl"
    with open(prompts, "w", encoding="utf-8") as fh:
        for i in range(n_prompts):
            fh.write(json.dumps({"id": f"p{i:07d}", "text": f"Benchmark prompt number {i} says that"}) + "\n")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "polytox.cli.main", "eval", "--out", str(run), "--prompts", str(prompts),
         "--model", "fake", "--scorer", "fake", "--samples", str(samples), "--max-new-tokens", "8",
         "--no-progress", "--json"],
        check=True, stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def first_read(run: Path) -> None:
    """``check_readable`` with an empty verified-files table: every part is hashed."""
    with tempfile.TemporaryDirectory() as cache:
        os.environ["POLYTOX_CACHE_DIR"] = cache
        RunStore(run).check_readable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "polytox-bench-verify")
    args = parser.parse_args()
    run = args.root / f"run-{args.prompts}x{args.samples}"
    built = build(run, args.prompts, args.samples)
    time.sleep(2.5)  # the parts' last change settles (``_util.verified.SETTLED_SECONDS``)
    files = sorted(p for p in run.rglob("*.parquet"))
    size = sum(p.stat().st_size for p in files)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["POLYTOX_CACHE_DIR"] = cache
        rows = {
            "SHA-256 of every Parquet file": median_seconds(lambda: [file_sha256(p) for p in files], args.repeat),
            "check_readable, first read (every part hashed)": median_seconds(lambda: first_read(run), args.repeat),
        }
        os.environ["POLYTOX_CACHE_DIR"] = cache
        RunStore(run).check_readable()  # remembers every part
        rows["check_readable, later reads (parts remembered)"] = median_seconds(
            lambda: RunStore(run).check_readable(), args.repeat
        )
        rows["eval --verify (every part hashed)"] = median_seconds(lambda: RunStore(run).verify(), args.repeat)
    print(f"run: {args.prompts} prompts x {args.samples} samples, {len(files)} Parquet files, "
          f"{size / 1e6:.1f} MB" + (f" (built in {built:.0f} s)" if built else ""))
    print(f"median of {args.repeat}, {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}")
    for name, seconds in rows.items():
        print(f"  {name:<50} {seconds:8.3f} s")


if __name__ == "__main__":
    main()
