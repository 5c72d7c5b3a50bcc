"""Cross-run analysis speed: ``polytox leaderboard`` / ``polytox report`` against a pandas baseline.

Synthetic run directories in the real store layout (prompts.parquet, generations/part-*.parquet,
scores/<scorer>/part-*.parquet, manifest.json) with R runs x P prompts x K continuations, 5 languages,
~2% failed generations and ~3% missing scores. For each size it times, in the same process:

- polytox: discover the runs, load them into one DuckDB corpus, build the leaderboard (overall, per
  language, per tier, per prompt toxicity);
- baseline: the usual notebook — ``pandas.read_parquet`` every part, merge scores and prompts, group by
  prompt then by (model, language) for AT / EMT / EP and their std (overall and per language only: it
  does less work than the leaderboard);
- the full report (every analysis, 8 matplotlib plots, HTML).

Usage: python benchmarks/bench_analysis.py [--sizes 4x2000x10,8x5000x10] [--keep DIR]
Prints a table; nothing here is a test. Timings on a shared 2-core machine are noisy: compare the
ratio within one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from polytox.analysis import AnalysisOptions, RunCollection, load_runs
from polytox.analysis.leaderboard import build_leaderboard
from polytox.report.build import build_report
from polytox.report.html import render_html
from polytox.spec import spec_from_flat
from polytox.store import GENERATION_SCHEMA, PROMPT_SCHEMA, RunStore

LANGS = ("en", "de", "hi", "ru", "id")
SCORER = "bench@1"
WORDS = np.array(("the", "day", "was", "long", "and", "quiet", "people", "walked", "to", "market", "idiot",
                  "stupid", "bread", "tea", "river"))


def make_run(
    path: Path, model: str, n_prompts: int, k: int, rng: np.random.Generator, shard: int = 500
) -> int:
    """One synthetic run directory; returns its number of generations."""
    store = RunStore(path)
    store.open(
        spec_from_flat({"model": f"fake:{model}", "samples": k, "scorer": "fake"}),
        extra={
            "scorer": {"id": SCORER},
            "model_meta": {"family": "bench", "params": f"{n_prompts}m", "category": "base"},
        },
    )
    ids = [f"p{i:07d}" for i in range(n_prompts)]
    ptox = rng.random(n_prompts)
    prompts = pa.table(
        {
            "prompt_id": ids,
            "position": np.arange(n_prompts),
            "text": [f"prompt {i}" for i in range(n_prompts)],
            "lang": [LANGS[i % len(LANGS)] for i in range(n_prompts)],
            "toxicity": ptox,
            "bucket": np.minimum((ptox * 4).astype(np.int8), 3),
            "source": ["generic"] * n_prompts,
            "meta_json": ["{}"] * n_prompts,
        },
        schema=PROMPT_SCHEMA,
    )
    pq.write_table(prompts, store.prompts_path)
    level = rng.uniform(0.05, 0.4)
    (path / "generations").mkdir(parents=True, exist_ok=True)
    for s, start in enumerate(range(0, n_prompts, shard)):
        pid = np.repeat(ids[start : start + shard], k)
        n = len(pid)
        failed = rng.random(n) < 0.02
        texts = [" ".join(WORDS[rng.integers(0, len(WORDS), 6)]) for _ in range(n)]
        gens = pa.table(
            {
                "prompt_id": pid,
                "sample_index": np.tile(np.arange(k, dtype=np.int32), n // k),
                "text": [None if f else t for f, t in zip(failed, texts, strict=True)],
                "finish_reason": ["error" if f else "length" for f in failed],
                "n_tokens": np.full(n, 6, np.int32),
                "prompt_truncated": np.zeros(n, bool),
                "error": ["FAKE_FAILURE" if f else None for f in failed],
            },
            schema=GENERATION_SCHEMA,
        )
        pq.write_table(gens, store.generation_part(s))
        tox = np.clip(rng.beta(1.2, 1.2 / level, n), 0, 1)
        missing = failed | (rng.random(n) < 0.03)
        scores = pa.table(
            {
                "prompt_id": pid,
                "sample_index": gens.column("sample_index"),
                "toxicity": pa.array(np.where(missing, np.nan, tox), mask=missing),
                "error": [
                    ("GENERATION_FAILED" if f else "EMPTY_TEXT") if m else None
                    for f, m in zip(failed, missing, strict=True)
                ],
            }
        )
        store.score_part(SCORER, s).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(scores, store.score_part(SCORER, s))
    store.update_manifest(status="complete")
    return n_prompts * k


def pandas_baseline(root: Path) -> pd.DataFrame:
    """The notebook way: read every part with pandas, merge, group twice."""
    frames = []
    for manifest in sorted(root.rglob("manifest.json")):
        run = manifest.parent
        model = json.loads(manifest.read_text())["spec"]["generation"]["model"]
        gens = pd.concat(
            [
                pd.read_parquet(p, columns=["prompt_id", "sample_index", "error"])
                for p in sorted((run / "generations").glob("part-*.parquet"))
            ]
        )
        scores = pd.concat(
            [
                pd.read_parquet(p, columns=["prompt_id", "sample_index", "toxicity"])
                for p in sorted((run / "scores").glob("*/part-*.parquet"))
            ]
        )
        prompts = pd.read_parquet(run / "prompts.parquet", columns=["prompt_id", "lang"])
        df = gens.merge(scores, on=["prompt_id", "sample_index"], how="left").merge(prompts, on="prompt_id")
        df["model"] = model
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    per = (
        df.groupby(["model", "lang", "prompt_id"])
        .agg(mean=("toxicity", "mean"), max=("toxicity", "max"), n=("toxicity", "count"))
        .reset_index()
    )
    per = per[per["n"] > 0]
    per["toxic"] = per["max"] >= 0.5
    overall = per.groupby("model").agg(
        at=("mean", "mean"),
        at_std=("mean", "std"),
        emt=("max", "mean"),
        emt_std=("max", "std"),
        ep=("toxic", "mean"),
    )
    by_lang = per.groupby(["model", "lang"]).agg(
        at=("mean", "mean"), emt=("max", "mean"), ep=("toxic", "mean")
    )
    wide = by_lang.unstack("lang")
    wide.columns = [f"{lang}_{metric}" for metric, lang in wide.columns]
    return overall.join(wide)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4x2000x10,8x5000x10,12x10000x10", help="RUNSxPROMPTSxK, comma list")
    ap.add_argument("--keep", help="write the runs here and keep them")
    args = ap.parse_args()
    console = Console(width=170)
    table = Table(title="cross-run analysis: polytox (DuckDB) vs pandas notebook baseline")
    for col in (
        "runs x prompts x K",
        "generations",
        "write runs s",
        "leaderboard s",
        "pandas baseline s",
        "baseline / polytox",
        "full report s",
        "report KiB",
        "max |AT diff|",
    ):
        table.add_column(col, justify="right")
    for size in args.sizes.split(","):
        r, p, k = (int(x) for x in size.lower().split("x"))
        root = Path(args.keep) / size if args.keep else Path(tempfile.mkdtemp(prefix="polytox-bench-"))
        if root.exists() and args.keep:
            shutil.rmtree(root)
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        n = sum(make_run(root / f"run{i:02d}", f"model-{i:02d}", p, k, rng) for i in range(r))
        t_write = time.perf_counter() - t0

        t0 = time.perf_counter()
        corpus = RunCollection(load_runs([root]))
        board = build_leaderboard(corpus, AnalysisOptions())
        t_board = time.perf_counter() - t0

        t0 = time.perf_counter()
        base = pandas_baseline(root)
        t_base = time.perf_counter() - t0
        diff = max(abs(row.overall["at"] - base.loc[row.model, "at"]) for row in board.rows)

        t0 = time.perf_counter()
        report = build_report(RunCollection(load_runs([root])), AnalysisOptions())
        html = render_html(report)
        t_report = time.perf_counter() - t0

        table.add_row(
            size,
            f"{n:,}",
            f"{t_write:.1f}",
            f"{t_board:.2f}",
            f"{t_base:.2f}",
            f"{t_base / t_board:.1f}x",
            f"{t_report:.1f}",
            f"{len(html.encode()) / 1024:.0f}",
            f"{diff:.1e}",
        )
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    console.print(table)


if __name__ == "__main__":
    main()
