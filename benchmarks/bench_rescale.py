"""Re-reading a run on another scale (``polytox metrics RUN --scale NAME``) against reading it as stored.

Synthesizes a run store as a ``polytox-ml`` run writes it (``toxicity`` and ``toxicity_raw`` per
continuation; the scorer id names the committed head, so its named scales apply): by default 100K prompts x
25 generations = 2.5M rows in 17 languages, with failed generations and failed scores. Then it times, in the
same process and alternating so both see the same load:

- **stored**: the metrics of the stored values (what ``polytox metrics RUN`` does: the strongest simple
  baseline, since a re-read can be no faster than a read);
- **rescaled**: the same metrics on another scale from the stored raw values (``--scale``): the raw column
  and each prompt's language read, one map per language applied, then the same reduction (its own step,
  reading and mapping, is timed alone too);

each with the full metric block (overall, every split, 95% bootstrap CIs, 1,000 resamples). It checks that
the re-read of the stored run on the scale it was scored on gives the stored metrics back.

    python benchmarks/bench_rescale.py                    # 2.5M rows
    python benchmarks/bench_rescale.py --prompts 2000     # a quick check

Target (issue 40): a 2.5M-row run re-read on another scale in under 5 s.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from bench_metrics import write_shard  # type: ignore[import-not-found]  # this folder, run as a script
from polytox.langs import PTP_LANGUAGES
from polytox.metrics import rescaled_scores, run_metrics
from polytox.scoring.ml.calib import ScaleMaps
from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.rescale import run_rescale
from polytox.spec import EvalSpec, GenerationSpec, MetricsSpec
from polytox.store import PROMPT_SCHEMA, RunStore, write_parquet


def synthesize(root: Path, n_prompts: int, k: int, shard_size: int, seed: int = 0) -> tuple[RunStore, str]:
    """A complete run directory scored 'by polytox-ml' (values = the head's own maps of a random raw)."""
    rng = np.random.default_rng(seed)
    head = MlHead.load(default_head_path())
    scorer = f"polytox-ml@{head.meta.get('version', '1')}-full-{head.digest}"
    maps = ScaleMaps.from_json(head.scale["full"])
    store = RunStore(root)
    spec = EvalSpec(generation=GenerationSpec(model="bench", backend="fake", samples=k), shard_size=shard_size)
    store.open(spec, extra={"scorer": {"id": scorer, "scale": "head"}})
    ids = np.char.add("p", np.char.zfill(np.arange(n_prompts).astype(str), 7))
    langs = rng.choice(np.array(sorted(PTP_LANGUAGES)), n_prompts)
    write_parquet(store.prompts_path, pa.table({
        "prompt_id": ids, "position": np.arange(n_prompts), "text": pa.array(["prompt"] * n_prompts),
        "lang": langs, "toxicity": rng.random(n_prompts), "bucket": rng.integers(0, 4, n_prompts).astype(np.int8),
        "source": pa.array(["bench"] * n_prompts), "meta_json": pa.array(["{}"] * n_prompts),
    }, schema=PROMPT_SCHEMA))
    for shard, start in enumerate(range(0, n_prompts, shard_size)):
        stop = min(n_prompts, start + shard_size)
        n = (stop - start) * k
        pid = np.repeat(ids[start:stop], k)
        failed_gen = rng.random(n) < 0.005
        missing = failed_gen | (rng.random(n) < 0.02)
        raw = rng.beta(0.6, 5.0, n)
        lang = np.repeat(langs[start:stop], k)
        tox = np.empty(n)
        for code in np.unique(lang):
            sel = lang == code
            tox[sel] = maps.apply_lang(raw[sel], str(code))
        write_shard(store, scorer, shard, pid, k, failed_gen, missing, {"toxicity": tox, "toxicity_raw": raw})
    return store, scorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--shard-size", type=int, default=1000, help="prompts per Parquet part")
    parser.add_argument("--n-bootstrap", type=int, default=1000)
    parser.add_argument("--scale", default="perspective-2020")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions; the fastest is reported")
    args = parser.parse_args()

    scratch = Path(__file__).resolve().parents[1] / "runs"  # git-ignored, not a shared /tmp
    scratch.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-rescale-", dir=scratch))
    try:
        t0 = time.perf_counter()
        store, scorer = synthesize(root, args.prompts, args.samples, args.shard_size)
        print(f"synthesized {args.prompts:,} prompts x {args.samples} = {args.prompts * args.samples:,} rows "
              f"({time.perf_counter() - t0:.1f} s); {os.cpu_count()} CPU(s); scale {args.scale}")
        spec = MetricsSpec(n_bootstrap=args.n_bootstrap)
        manifest = store.manifest()
        rescale = run_rescale(manifest, scorer, args.scale)
        same = run_rescale(manifest, scorer, "head")  # the run was scored on the head's own maps
        timings: dict[str, list[float]] = {"stored": [], "rescaled": [], "map": []}
        for _ in range(args.repeat):
            for name in timings:
                wall = time.perf_counter()
                if name == "map":  # the re-read's own step: raw values and languages read, maps applied
                    con = duckdb.connect()
                    con.execute("CREATE VIEW prompts AS SELECT prompt_id, lang "
                                f"FROM read_parquet('{store.prompts_path}')")
                    rescaled_scores(con, store.glob("scores", scorer), rescale[1])
                else:
                    run_metrics(str(root), scorer, spec, rescale=rescale if name == "rescaled" else None)
                timings[name].append(time.perf_counter() - wall)
        stored = run_metrics(str(root), scorer, spec)
        back = run_metrics(str(root), scorer, spec, rescale=same)
        for key in ("emt", "ep", "at", "n_prompts"):
            assert math.isclose(stored["overall"][key], back["overall"][key], rel_tol=1e-9), key
        other = run_metrics(str(root), scorer, spec, rescale=rescale)
        print(f"\n| read | wall s (best of {args.repeat}) | EMT | EP | AT |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, result in (("stored values (baseline)", stored), (f"rescaled to {args.scale}", other)):
            key = "stored" if name.startswith("stored") else "rescaled"
            o = result["overall"]
            print(f"| {name} | {min(timings[key]):.2f} | {o['emt']:.4f} | {o['ep']:.4f} | {o['at']:.4f} |")
        print(f"| (of which: raw values read and mapped) | {min(timings['map']):.2f} | | | |")
        print(f"\nre-read on the run's own scale gives the stored metrics back (EMT {back['overall']['emt']:.6f})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
