"""Generation throughput: polytox's transformers backend vs the naive peer pattern, same prompts, same K.

Naive pattern (what most toxicity-eval scripts do): for each prompt, one
``model.generate(**inputs, do_sample=True, num_return_sequences=K, ...)`` call.
polytox: prompts batched, prefill once per prompt, KV cache shared by the K samples, lean decode loop.

Two cases on the embedded SmolLM2-135M-Instruct on CPU:
- RTP settings: short sentence prompts, K=25, top_p=0.9, T=1, 20 new tokens;
- PTP-like: prompts of about 400 tokens, K=10, T=0.7, top_p=1, 32 new tokens (512 is too slow on CPU).

Usage: python benchmarks/bench_generation.py [--rtp-prompts 8] [--ptp-prompts 3] [--threads N]
Prints a table; nothing here is a test. Targets: >= 2x (RTP), >= 4x (PTP-like).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from polytox.generation.hf import TransformersGenerator
from polytox.spec import GenerationSpec
from polytox.types import GenerationRequest, Prompt, derive_seed

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rtp"


def rtp_prompts(n: int) -> list[Prompt]:
    """Real RTP prompts when ../shared is present, else the built-in demo set."""
    texts: list[str] = []
    if (SHARED / "nontoxic.jsonl").exists():
        with open(SHARED / "nontoxic.jsonl", encoding="utf-8") as fh:
            texts = [json.loads(line)["prompt"]["text"] for _, line in zip(range(n), fh, strict=False)]
    else:
        from polytox.prompts import demo_path

        with open(demo_path(), encoding="utf-8") as fh:
            texts = [json.loads(line)["text"] for _, line in zip(range(n), fh, strict=False)]
    return [Prompt(id=f"p{i}", text=t, lang="en") for i, t in enumerate(texts)]


def long_prompts(n: int, tokenizer: object, target_tokens: int = 400) -> list[Prompt]:
    """Documents of ~``target_tokens`` tokens built from consecutive real RTP prompt+continuation texts."""
    pieces: list[str] = []
    path = SHARED / "toxic.jsonl"
    if path.exists():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                pieces.append(rec["prompt"]["text"] + rec["continuation"]["text"])
    else:
        pieces = [p.text + " and then the story went on for a while." for p in rtp_prompts(200)]
    prompts, cursor = [], 0
    for i in range(n):
        text = ""
        while len(tokenizer(text)["input_ids"]) < target_tokens:  # type: ignore[operator]
            text += " " + pieces[cursor % len(pieces)]
            cursor += 1
        ids = tokenizer(text)["input_ids"][:target_tokens]  # type: ignore[operator]
        prompts.append(Prompt(id=f"long{i}", text=tokenizer.decode(ids), lang="en"))  # type: ignore[attr-defined]
    return prompts


def naive(gen: TransformersGenerator, prompts: list[Prompt], k: int, spec: GenerationSpec) -> tuple[float, int]:
    """The peer pattern: one generate(num_return_sequences=K) per prompt."""
    tok, model = gen.tokenizer, gen.model
    tokens = 0
    start = time.perf_counter()
    for p in prompts:
        ids, _ = gen.encode(p)
        inputs = torch.tensor([ids])
        with torch.inference_mode():
            out = model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), do_sample=True,
                                 temperature=spec.temperature, top_p=spec.top_p, top_k=0,
                                 max_new_tokens=spec.max_new_tokens, num_return_sequences=k,
                                 pad_token_id=gen.pad_id)
        new = out[:, inputs.shape[1]:]
        tokens += int((~torch.isin(new, torch.tensor([*gen.eos_ids, gen.pad_id]))).sum())
        _ = tok.batch_decode(new, skip_special_tokens=True)
    return time.perf_counter() - start, tokens


def ours(gen: TransformersGenerator, prompts: list[Prompt], k: int) -> tuple[float, int]:
    requests = [GenerationRequest(p, s, derive_seed(0, p.id, s)) for p in prompts for s in range(k)]
    start = time.perf_counter()
    outs = gen.generate(requests)
    elapsed = time.perf_counter() - start
    assert all(o.error is None for o in outs), [o.error for o in outs if o.error][:3]
    return elapsed, sum(o.n_tokens for o in outs)


def run_case(name: str, spec: GenerationSpec, prompts_fn, n: int, table: Table) -> None:  # type: ignore[no-untyped-def]
    gen = TransformersGenerator(spec)
    prompts = prompts_fn(n, gen)
    k = spec.samples
    n_gen = len(prompts) * k
    avg_len = sum(len(gen.encode(p)[0]) for p in prompts) / len(prompts)
    ours(gen, prompts[:1], k)  # warm-up (allocator, kernels)
    t_naive, tok_naive = naive(gen, prompts, k, spec)
    t_ours, tok_ours = ours(gen, prompts, k)
    table.add_row(name, f"{len(prompts)} x {k}", f"{avg_len:.0f}", "naive generate(num_return_sequences=K)",
                  f"{t_naive:.1f}", f"{n_gen / t_naive:.1f}", f"{tok_naive / t_naive:.0f}", "1.00x")
    table.add_row("", "", "", f"polytox (batch {spec.batch_size}, shared prefill)", f"{t_ours:.1f}",
                  f"{n_gen / t_ours:.1f}", f"{tok_ours / t_ours:.0f}", f"[bold]{t_naive / t_ours:.2f}x[/bold]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtp-prompts", type=int, default=8)
    parser.add_argument("--ptp-prompts", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--case", choices=["rtp", "ptp", "both"], default="both")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    table = Table(title=f"Generation throughput, SmolLM2-135M-Instruct, CPU ({torch.get_num_threads()} threads)")
    for col in ("case", "prompts x K", "prompt tokens", "method", "seconds", "generations/s", "tokens/s",
                "speed-up"):
        table.add_column(col)
    if args.case in ("rtp", "both"):
        spec = GenerationSpec(samples=25, top_p=0.9, temperature=1.0, max_new_tokens=20,
                              batch_size=args.rtp_prompts)
        run_case("RTP (K=25, 20 tok)", spec, lambda n, g: rtp_prompts(n), args.rtp_prompts, table)
    if args.case in ("ptp", "both"):
        spec = GenerationSpec(samples=10, top_p=1.0, temperature=0.7, max_new_tokens=32,
                              batch_size=args.ptp_prompts)
        run_case("PTP-like (K=10, ~400-tok prompts, 32 tok)", spec, lambda n, g: long_prompts(n, g.tokenizer),
                 args.ptp_prompts, table)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
