"""vLLM-CPU vs polytox's transformers backend on CPU: same model, prompts, K and sampling settings.

Both run polytox's own generators (``VLLMGenerator``, ``TransformersGenerator``) on the embedded
SmolLM2-135M-Instruct, in this one process, one after the other, after one warm-up batch each:

- RTP settings: real RTP prompts (or the built-in demo set), K=25, T=1, top_p=0.9, 20 new tokens;
- PTP-like (``--ptp-prompts N``, 0 = skip): ~400-token prompts, K=10, T=0.7, top_p=1, 32 new tokens.

vLLM runs twice: in float32 (the transformers backend's CPU dtype: the same arithmetic) and in its CPU
default dtype (bfloat16). Needs vLLM's CPU build: ``make bench-vllm-cpu`` (runs this in ``.venv-vllm``).

Usage: python benchmarks/bench_vllm_cpu.py [--rtp-prompts 8] [--ptp-prompts 2] [--threads 2]
Prints a table; nothing here is a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process, like the other row

from rich.console import Console
from rich.table import Table

from polytox.generation.base import Generator
from polytox.models import resolve_model
from polytox.spec import GenerationSpec
from polytox.types import GenerationRequest, Prompt, derive_seed

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rtp"
MODEL = "smollm2-135m-instruct"


def rtp_texts(n: int, name: str = "nontoxic.jsonl") -> list[str]:
    """Real RTP prompts when ../shared is present, else the built-in demo set."""
    if (SHARED / name).exists():
        with open(SHARED / name, encoding="utf-8") as fh:
            return [json.loads(line)["prompt"]["text"] for _, line in zip(range(n), fh, strict=False)]
    from polytox.prompts import demo_path

    with open(demo_path(), encoding="utf-8") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(n), fh, strict=False)]


def long_texts(n: int, words: int = 300) -> list[str]:
    """~400-token documents: consecutive RTP prompts joined until about ``words`` words each."""
    pool = rtp_texts(40 * n + 40, "toxic.jsonl" if (SHARED / "toxic.jsonl").exists() else "nontoxic.jsonl")
    out, cursor = [], 0
    for _ in range(n):
        text: list[str] = []
        while len(text) < words:
            text += pool[cursor % len(pool)].split()
            cursor += 1
        out.append(" ".join(text[:words]))
    return out


def requests_for(texts: list[str], k: int) -> list[GenerationRequest]:
    prompts = [Prompt(f"p{i}", t, "en") for i, t in enumerate(texts)]
    return [GenerationRequest(p, j, derive_seed(0, p.id, j)) for p in prompts for j in range(k)]


def timed(gen: Generator, reqs: list[GenerationRequest], batch: int) -> tuple[float, int, int]:
    """Seconds, tokens and failed samples over ``reqs`` sent in batches of ``batch`` prompts."""
    k = len({r.sample_index for r in reqs})
    start = time.perf_counter()
    tokens = errors = 0
    for i in range(0, len(reqs), batch * k):
        for g in gen.generate(reqs[i:i + batch * k]):
            tokens += g.n_tokens
            errors += g.error is not None
    return time.perf_counter() - start, tokens, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rtp-prompts", type=int, default=8)
    ap.add_argument("--ptp-prompts", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "auto")
    path = resolve_model(MODEL)[0]
    cases = [("RTP (K=25, 20 tok, top_p 0.9)", rtp_texts(args.rtp_prompts), 25,
              {"max_new_tokens": 20, "temperature": 1.0, "top_p": 0.9}, 8)]
    if args.ptp_prompts:
        cases.append(("PTP-like (K=10, ~400-tok prompts, 32 tok)", long_texts(args.ptp_prompts), 10,
                      {"max_new_tokens": 32, "temperature": 0.7, "top_p": 1.0}, 2))

    def transformers_backend(s: GenerationSpec) -> Generator:
        from polytox.generation.hf import TransformersGenerator

        return TransformersGenerator(dataclasses.replace(s, dtype="float32"))

    def vllm_backend(dtype: str) -> Callable[[GenerationSpec], Generator]:
        def build(s: GenerationSpec) -> Generator:
            from polytox.generation.vllm_backend import VLLMGenerator

            options = (("enforce_eager", "true"), ("max_model_len", "1024"),
                       ("kv_cache_memory_bytes", str(1 << 30)))
            return VLLMGenerator(dataclasses.replace(s, backend="vllm", dtype=dtype, options=options))
        return build

    backends: list[tuple[str, Callable[[GenerationSpec], Generator]]] = [
        ("polytox transformers (float32)", transformers_backend),
        ("polytox vLLM-CPU (float32)", vllm_backend("float32")),
        ("polytox vLLM-CPU (bfloat16, its default)", vllm_backend("auto")),
    ]
    rows: list[list[Any]] = []
    for case, texts, k, settings, batch in cases:
        spec = GenerationSpec(model=path, samples=k, **settings)
        for name, build in backends:
            started = time.perf_counter()
            gen = build(spec)
            load = time.perf_counter() - started
            timed(gen, requests_for(texts[:1], k), 1)  # warm-up
            seconds, tokens, errors = timed(gen, requests_for(texts, k), batch)
            rows.append([case, name, f"{load:.1f}", len(texts) * k, tokens, errors, f"{seconds:.1f}",
                         tokens / seconds])
            print(" | ".join(str(x) for x in rows[-1]), flush=True)  # each row as soon as it is measured
            gen.close()
            del gen
            gc.collect()
    base = {r[0]: r[7] for r in rows if "transformers" in r[1]} or {r[0]: r[7] for r in rows}
    table = Table(title=f"vLLM-CPU vs transformers, {MODEL}, {args.threads} threads, load avg "
                        f"{os.getloadavg()[0]:.1f} at the end")
    for col in ("setting", "backend", "load s", "samples", "tokens", "failed", "gen s", "tok/s", "vs transformers"):
        table.add_column(col)
    for r in rows:
        table.add_row(*[str(x) for x in r[:7]], f"{r[7]:.0f}", f"{r[7] / base.get(r[0], r[7]):.2f}x")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
