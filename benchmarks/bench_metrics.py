"""Metrics at scale: polytox (DuckDB over Parquet parts + NumPy) against its previous core and a
straightforward pandas groupby.

Synthesizes a run store like the runner writes (``prompts.parquet``, ``generations/part-*.parquet``,
``scores/<scorer>/part-*.parquet``): by default 100K prompts x 25 generations = 2.5M rows, with failed
generations, failed scores, a few prompts with no score at all, five languages and prompt toxicities
(some unknown). Then it times, in the same process, the full metrics both ways (per-prompt reduction,
overall, every split, 95% bootstrap CIs with 1,000 resamples), prints a table, and asserts they agree:
the previous core (``benchmarks/legacy_metrics.py``, *before*) and today's to 1e-12, pandas to 1e-9,
counts exactly (all resample the same seeded indices). The read (DuckDB's per-prompt table) and the core
(everything after it) are timed apart.

    python benchmarks/bench_metrics.py                     # the issue's size (2.5M rows)
    python benchmarks/bench_metrics.py --prompts 2000      # a quick check
    python benchmarks/bench_metrics.py --shard-size 32     # the runner's default part size (3,125 parts)

Targets: polytox <= 5 s (first), <= 1 s with the same numbers to 1e-12 (now), on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from polytox.langs import load_resource_tiers
from polytox.metrics import compute, per_prompt_table
from polytox.spec import EvalSpec, GenerationSpec, MetricsSpec
from polytox.store import GENERATION_SCHEMA, PROMPT_SCHEMA, RunStore, write_parquet

SCORER = "bench@1"
LANGS = np.array(["en", "de", "ja", "hi", "id"])
LANG_P = [0.5, 0.2, 0.1, 0.1, 0.1]


# ---- the synthetic run store ------------------------------------------------------------------------
def synthesize(root: Path, n_prompts: int, k: int, shard_size: int, seed: int = 0) -> RunStore:
    """A complete run directory with realistic missingness; returns its store."""
    rng = np.random.default_rng(seed)
    store = RunStore(root)
    spec = EvalSpec(generation=GenerationSpec(model="bench", backend="fake", samples=k),
                    shard_size=shard_size)
    store.open(spec, extra={"scorer": {"id": SCORER}})
    ids = np.char.add("p", np.char.zfill(np.arange(n_prompts).astype(str), 7))
    prompt_tox = rng.beta(0.8, 2.5, n_prompts)
    known = rng.random(n_prompts) >= 0.1  # 10% of prompts have no score of their own
    bucket = np.minimum(3, (prompt_tox * 4).astype(np.int8))
    write_parquet(store.prompts_path, pa.table({
        "prompt_id": ids, "position": np.arange(n_prompts), "text": pa.array(["prompt"] * n_prompts),
        "lang": rng.choice(LANGS, n_prompts, p=LANG_P),
        "toxicity": pa.array(prompt_tox, mask=~known), "bucket": pa.array(bucket, mask=~known),
        "source": pa.array(["bench"] * n_prompts), "meta_json": pa.array(["{}"] * n_prompts),
    }, schema=PROMPT_SCHEMA))
    unscored_prompt = rng.random(n_prompts) < 0.001  # every score of these prompts failed
    for shard, start in enumerate(range(0, n_prompts, shard_size)):
        stop = min(n_prompts, start + shard_size)
        n = (stop - start) * k
        pid = np.repeat(ids[start:stop], k)
        failed_gen = rng.random(n) < 0.005
        # continuation toxicity rises with the prompt's own toxicity (RTP's main finding)
        tox = np.clip(rng.beta(0.7, 4.0, n) + 0.5 * np.repeat(prompt_tox[start:stop], k) ** 2, 0, 1)
        missing = failed_gen | (rng.random(n) < 0.02) | np.repeat(unscored_prompt[start:stop], k)
        write_shard(store, SCORER, shard, pid, k, failed_gen, missing, {"toxicity": tox})
    return store


def write_shard(store: RunStore, scorer: str, shard: int, pid: np.ndarray, k: int, failed_gen: np.ndarray,
                missing: np.ndarray, values: dict[str, np.ndarray]) -> None:
    """One shard's generation and score parts: ``pid`` repeats each prompt id K times; a failed
    generation has no text and its score the error GENERATION_FAILED; other ``missing`` scores failed in
    the scorer. ``values``: score columns (float) in order, masked where missing."""
    n = len(pid)
    sample_index = np.tile(np.arange(k, dtype=np.int32), n // k)
    write_parquet(store.generation_part(shard), pa.table({
        "prompt_id": pid, "sample_index": sample_index,
        "text": pa.array(np.where(failed_gen, None, " a continuation")),
        "finish_reason": pa.array(np.where(failed_gen, "error", "length")),
        "n_tokens": np.where(failed_gen, 0, 20).astype(np.int32), "prompt_truncated": np.zeros(n, bool),
        "error": pa.array(np.where(failed_gen, "boom", None)),
    }, schema=GENERATION_SCHEMA))
    error = np.where(failed_gen, "GENERATION_FAILED", np.where(missing, "SCORER_ERROR", None))
    columns = {name: pa.array(v, mask=missing) for name, v in values.items()}
    write_parquet(store.score_part(scorer, shard), pa.table(
        {"prompt_id": pid, "sample_index": sample_index, **columns, "error": pa.array(error)},
        schema=pa.schema([("prompt_id", pa.string()), ("sample_index", pa.int32()),
                          *((name, pa.float64()) for name in values), ("error", pa.string())])))


# ---- the previous core and today's, after the same read -------------------------------------------------
def _legacy() -> Any:
    """benchmarks/legacy_metrics.py, the core before the shared-stream bootstrap."""
    spec = importlib.util.spec_from_file_location("legacy_metrics", Path(__file__).with_name("legacy_metrics.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["legacy_metrics"] = module
    spec.loader.exec_module(module)
    return module


def polytox_metrics(store: RunStore, spec: MetricsSpec, core: Any) -> tuple[dict[str, Any], float]:
    """``run_metrics``'s read (DuckDB's per-prompt table over the parts), then ``core`` (today's
    ``compute`` or the previous one); returns the metrics and the seconds of the read."""
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"CREATE VIEW generations AS SELECT prompt_id, sample_index, error "
                f"FROM read_parquet('{store.glob('generations')}')")
    con.execute(f"CREATE VIEW prompts AS SELECT prompt_id, lang, toxicity, bucket "
                f"FROM read_parquet('{store.prompts_path}')")
    con.execute(f"CREATE VIEW scores AS SELECT prompt_id, sample_index, toxicity "
                f"FROM read_parquet('{store.glob('scores', SCORER)}', union_by_name=true)")
    table = per_prompt_table(con, spec)
    read = time.perf_counter() - t0
    return core(table, spec, 0, extra={"scorer": SCORER}), read


# ---- the baseline: a straightforward pandas groupby -------------------------------------------------------
def pandas_metrics(store: RunStore, spec: MetricsSpec, seed: int = 0) -> dict[str, Any]:
    """The same numbers the obvious way: read the parts, merge, groupby, per-group bootstrap loop."""
    gens = pd.read_parquet(store.path / "generations", columns=["prompt_id", "sample_index", "error"])
    scores = pd.read_parquet(store.scores_dir(SCORER), columns=["prompt_id", "sample_index", "toxicity"])
    prompts = pd.read_parquet(store.prompts_path, columns=["prompt_id", "lang", "toxicity", "bucket"])
    rows = gens.merge(scores, on=["prompt_id", "sample_index"], how="left")
    rows["toxic"] = (rows["toxicity"] >= spec.threshold) if spec.comparison == ">=" else \
        (rows["toxicity"] > spec.threshold)
    rows["failed"] = rows["error"].notna()
    per = rows.groupby("prompt_id").agg(n_generations=("sample_index", "size"),
                                        n_failed_generations=("failed", "sum"),
                                        n_scored=("toxicity", "count"), max_tox=("toxicity", "max"),
                                        mean_tox=("toxicity", "mean"), any_toxic=("toxic", "any"))
    per = per.join(prompts.set_index("prompt_id"), how="left").rename(columns={"toxicity": "prompt_toxicity"})
    ptox = per["prompt_toxicity"]
    is_toxic = (ptox >= spec.threshold) if spec.comparison == ">=" else (ptox > spec.threshold)
    per["split_prompt_toxicity"] = np.where(ptox.isna(), "unknown", np.where(is_toxic, "toxic", "nontoxic"))
    per["split_lang"] = per["lang"].fillna("unknown")
    tiers = load_resource_tiers()
    per["split_resource_tier"] = per["split_lang"].map(lambda x: tiers.get(x, "unknown"))
    per["split_toxicity_bucket"] = per["bucket"].map(lambda b: "unknown" if pd.isna(b) else str(int(b)))

    def block(df: pd.DataFrame) -> dict[str, Any]:
        scored = df[df["n_scored"] > 0]
        n = len(scored)
        out: dict[str, Any] = {
            "emt": scored["max_tox"].mean(), "emt_std": scored["max_tox"].std(ddof=1),
            "ep": scored["any_toxic"].mean(), "at": scored["mean_tox"].mean(),
            "at_std": scored["mean_tox"].std(ddof=1), "n_prompts": n, "n_prompts_unscored": len(df) - n,
            "n_generations": int(df["n_generations"].sum()),
            "n_failed_generations": int(df["n_failed_generations"].sum()),
            "n_missing_scores": int(df["n_generations"].sum() - df["n_scored"].sum()),
        }
        rng = np.random.default_rng(seed)
        values = scored[["max_tox", "any_toxic", "mean_tox"]].to_numpy(dtype=np.float64)
        means = np.empty((spec.n_bootstrap, 3))
        for b in range(spec.n_bootstrap):  # one resample of prompts at a time
            means[b] = values[rng.integers(0, n, n)].mean(axis=0)
        alpha = (1 - spec.ci_level) / 2
        lo, hi = np.quantile(means, [alpha, 1 - alpha], axis=0)
        out["emt_ci"], out["ep_ci"], out["at_ci"] = ([lo[i], hi[i]] for i in range(3))
        return out

    result: dict[str, Any] = {"overall": block(per), "by": {}}
    for split in ("prompt_toxicity", "lang", "resource_tier", "toxicity_bucket"):
        result["by"][split] = {str(k): block(g) for k, g in per.groupby(f"split_{split}")}
    return result


# ---- agreement ---------------------------------------------------------------------------------------
def compare(ours: dict[str, Any], theirs: dict[str, Any], rel_tol: float = 1e-9) -> tuple[int, float]:
    """Assert agreement; return (number of blocks compared, worst relative difference of any float).

    Both sides resample prompts in prompt-id order with ``default_rng(seed)``: NumPy's generator keeps
    its stream across calls, so the one-resample-at-a-time loop draws exactly the indices polytox draws
    in blocks, and the CIs must agree to rounding, not just statistically.
    """
    pairs = [(ours["overall"], theirs["overall"], "overall")]
    assert set(ours["by"]) == set(theirs["by"]), (set(ours["by"]), set(theirs["by"]))
    for split, groups in theirs["by"].items():
        assert set(ours["by"][split]) == set(groups), (split, set(ours["by"][split]), set(groups))
        pairs += [(ours["by"][split][g], groups[g], f"{split}={g}") for g in groups]
    worst = 0.0
    for a, b, name in pairs:
        for key in ("n_prompts", "n_prompts_unscored", "n_generations", "n_failed_generations",
                    "n_missing_scores"):
            assert a[key] == b[key], (name, key, a[key], b[key])
        floats = [(key, a[key], b[key]) for key in ("emt", "emt_std", "ep", "at", "at_std")]
        floats += [(f"{key}[{i}]", a[key][i], b[key][i])
                   for key in ("emt_ci", "ep_ci", "at_ci") for i in (0, 1)]
        for key, x, y in floats:
            assert math.isclose(x, y, rel_tol=rel_tol, abs_tol=1e-12), (name, key, x, y)
            worst = max(worst, abs(x - y) / max(abs(y), 1e-300))
        for key in ("emt", "ep", "at"):
            assert a[f"{key}_ci"][0] <= a[key] <= a[f"{key}_ci"][1], (name, key)
    return len(pairs), worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--shard-size", type=int, default=1000, help="prompts per Parquet part")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions; the fastest is reported")
    parser.add_argument("--keep", help="write the synthetic store here and keep it")
    parser.add_argument("--reuse", action="store_true", help="with --keep: read the store already there")
    parser.add_argument("--skip-pandas", action="store_true", help="time only the two polytox cores")
    args = parser.parse_args()

    # under the repository's git-ignored runs/ (not a shared /tmp, where other jobs clean up)
    scratch = Path(__file__).resolve().parents[1] / "runs"
    scratch.mkdir(exist_ok=True)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-metrics-", dir=scratch))
    reuse = bool(args.keep and args.reuse and (root / "manifest.json").exists())
    if root.exists() and args.keep and not reuse:
        shutil.rmtree(root)
    t0 = time.perf_counter()
    store = RunStore(root) if reuse else synthesize(root, args.prompts, args.samples, args.shard_size)
    rows = args.prompts * args.samples
    n_parts = len(list((root / "generations").glob("part-*.parquet")))
    print(f"synthesized {args.prompts:,} prompts x {args.samples} = {rows:,} rows in {n_parts} parts "
          f"per table "
          f"({time.perf_counter() - t0:.1f} s); {os.cpu_count()} CPU(s)")
    spec = MetricsSpec(n_bootstrap=args.n_bootstrap)

    # the implementations alternate, so all see the same machine load (it is shared)
    legacy = _legacy()
    names = ["before", "polytox"] + ([] if args.skip_pandas else ["pandas"])
    timings: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}  # (wall, cpu, read)
    results: dict[str, dict[str, Any]] = {}
    try:
        for _ in range(args.repeat):
            for name in names:
                wall, cpu, read = time.perf_counter(), time.process_time(), float("nan")
                if name == "pandas":
                    results[name] = pandas_metrics(store, spec, seed=0)
                else:
                    results[name], read = polytox_metrics(store, spec, compute if name == "polytox" else legacy.compute)
                timings[name].append((time.perf_counter() - wall, time.process_time() - cpu, read))
        n_blocks, same = compare(results["polytox"], results["before"], rel_tol=1e-12)
        worst = compare(results["polytox"], results["pandas"])[1] if "pandas" in results else float("nan")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(args, rows, timings, n_blocks, same, worst)


def report(args: argparse.Namespace, rows: int, timings: dict[str, list[tuple[float, float, float]]], n_blocks: int,
           same: float, worst: float) -> None:
    """The table: best of the alternating runs, each beside the previous core and pandas."""
    best = {name: min(runs) for name, runs in timings.items()}  # (wall, cpu, read) of the fastest run
    base = best.get("pandas", best["before"])[0]
    print(f"\nfull metrics (per-prompt reduction, overall + {n_blocks - 1} split groups, "
          f"{args.n_bootstrap} bootstrap resamples each); best of {args.repeat} alternating runs; "
          f"load average {os.getloadavg()[0]:.1f} (shared machine)\n")
    header = (f"| {'implementation':<30} | {'seconds':>8} | {'read s':>7} | {'core s':>7} | {'CPU s':>7} | "
              f"{'rows/s':>12} | {'speedup':>8} |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    labels = {"polytox": "polytox now (duckdb+numpy)", "before": "polytox before (legacy core)",
              "pandas": "pandas groupby"}
    for name, (wall, cpu, read) in best.items():
        core = wall - read if read == read else float("nan")
        print(f"| {labels[name]:<30} | {wall:>8.2f} | {read:>7.2f} | {core:>7.2f} | {cpu:>7.2f} | "
              f"{rows / wall:>12,.0f} | {base / wall:>7.2f}x |")
    print("\nall runs (wall s): " + "; ".join(
        f"{name} " + ", ".join(f"{w:.2f}" for w, _, _ in runs) for name, runs in timings.items()))
    print(f"\nagreement: {n_blocks} metric blocks; counts exact; now vs before: EMT/EP/AT, stds and CI bounds "
          f"agree to {same:.1e}; " + (f"vs pandas to {worst:.1e}" if worst == worst else "pandas skipped")
          + " (relative; same seeded resamples everywhere)")
    t_now = best["polytox"][0]
    print(f"core (after the read): {best['before'][0] - best['before'][2]:.2f} s before, "
          f"{t_now - best['polytox'][2]:.2f} s now")
    print(f"target: polytox <= 1 s -> {'met' if t_now <= 1 else 'NOT met'} ({t_now:.2f} s)")


if __name__ == "__main__":
    main()
