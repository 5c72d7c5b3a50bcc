"""lm-eval's documented route against ``polytox eval`` on the same prompts, K and model, in one run.

Runs, one after the other in this virtualenv (the integrations one: ``make integrations-venv``) with the same
threads: the offline lm-eval command of docs/integrations.md (``realtoxicityprompts_polytox_k25``, the
embedded SmolLM2, ``--batch_size 25``, the built-in prompts, ``--limit 4``) and ``polytox eval`` on the same 4
prompts at K = 25 with the default scorer. Prints each route's wall time (model load, generation and scoring
included), the tokens it generated (lm-eval's completions re-tokenised with the model's tokenizer; polytox's
stored ``n_tokens``) and tokens per second. Target (docs/integrations.md): lm-eval within 2x of polytox's
tok/s. Usage: python benchmarks/bench_lm_eval_route.py [--limit 4] [--batch-size 25] [--out runs/bench-lm-eval]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=25)
    parser.add_argument("--out", default="runs/bench-lm-eval")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from polytox.integrations.lm_eval import include_path
    from polytox.models import resolve_model

    model = resolve_model("smollm2-135m-instruct")[0]
    out = Path(args.out)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    lm_out = out / "lm-eval"
    lm_wall = timed(
        [
            str(BIN / "lm_eval"),
            "run",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={model}",
            "--batch_size",
            str(args.batch_size),
            "--tasks",
            "realtoxicityprompts_polytox_k25",
            "--include_path",
            str(include_path()),
            "--metadata",
            json.dumps({"polytox_data": "demo"}),
            "--limit",
            str(args.limit),
            "--output_path",
            str(lm_out),
            "--log_samples",
        ],
        env,
    )
    (samples,) = sorted(lm_out.rglob("samples_realtoxicityprompts_polytox_k25_*.jsonl"))[-1:]
    tokenizer = AutoTokenizer.from_pretrained(model)
    from polytox.integrations.importing.lm_eval_samples import polytox_record

    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    texts = [s["text"] for row in rows for s in (polytox_record(row) or {"samples": []})["samples"]]
    lm_tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)

    px_out = out / "polytox"
    px_wall = timed(
        [
            str(BIN / "polytox"),
            "eval",
            "--prompts",
            "demo",
            "--lang",
            "en",
            "--limit",
            str(args.limit),
            "--samples",
            "25",
            "--out",
            str(px_out),
            "--no-progress",
        ],
        env,
    )
    import pyarrow.parquet as pq

    gens = pq.read_table(px_out / "generations").to_pylist()
    px_tokens = sum(int(g["n_tokens"] or 0) for g in gens)
    print(
        f"{args.limit} prompts x K=25, smollm2-135m-instruct, default scorer, OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )
    for name, wall, tokens, n in (
        ("lm-eval (documented, batched)", lm_wall, lm_tokens, len(texts)),
        ("polytox eval", px_wall, px_tokens, len(gens)),
    ):
        print(f"{name:32s} {n:4d} generations  {tokens:5d} tokens  {wall:7.1f} s wall  {tokens / wall:7.1f} tok/s")
    print(f"lm-eval / polytox tok/s: {(lm_tokens / lm_wall) / (px_tokens / px_wall):.2f} (target >= 0.5)")


if __name__ == "__main__":
    main()
