"""Generation throughput: polytox's transformers backend vs HF batched ``generate`` and the naive loop.

Same prompts, same K, same sampling settings, all in one run:
- naive pattern (what most toxicity-eval scripts do): for each prompt, one
  ``model.generate(**inputs, do_sample=True, num_return_sequences=K, ...)`` call;
- HF batched ``generate`` (the strongest simple baseline): ``model.generate`` on a left-padded batch of
  ``batch`` prompts at once, ``num_return_sequences=K``;
- polytox lock-step loop (``continuous=false``): prefill once per prompt, K rows share it, one batch
  decodes in lock step;
- polytox (default): the same prefill sharing, continuous batching over KV-cache slots, sampling on the
  device.

Two cases on the embedded SmolLM2-135M-Instruct on CPU:
- RTP settings: short sentence prompts, K=25, top_p=0.9, T=1, 20 new tokens;
- PTP-like: prompts of about 400 tokens, K=10, T=0.7, top_p=1, 32 new tokens (512 is too slow on CPU).

Usage: python benchmarks/bench_generation.py [--rtp-prompts 8] [--ptp-prompts 3] [--rtp-batch B] [--threads N]
Prints a table; nothing here is a test. Targets: polytox >= 1.3x batched ``generate``; >= 2x (RTP) and
>= 4x (PTP-like) the naive loop.
"""

from __future__ import annotations

import argparse
import dataclasses
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


def kept_tokens(new: torch.Tensor, eos_ids: list[int]) -> int:
    """Generated tokens per row up to (excluding) the first EOS, summed."""
    is_eos = torch.isin(new, torch.tensor(eos_ids or [-1]))
    seen = is_eos.cumsum(dim=1) > 0
    return int((~seen).sum())


def batched(gen: TransformersGenerator, prompts: list[Prompt], k: int, spec: GenerationSpec,
            batch: int) -> tuple[float, int]:
    """HF batched generate: left-padded batches of ``batch`` prompts, ``num_return_sequences=K``."""
    tokens = 0
    start = time.perf_counter()
    for i in range(0, len(prompts), batch):
        encoded = [gen.encode(p)[0] for p in prompts[i : i + batch]]
        width = max(len(ids) for ids in encoded)
        inputs = torch.full((len(encoded), width), gen.pad_id, dtype=torch.long)
        mask = torch.zeros_like(inputs)
        for row, ids in enumerate(encoded):
            inputs[row, width - len(ids):] = torch.tensor(ids)
            mask[row, width - len(ids):] = 1
        with torch.inference_mode():
            out = gen.model.generate(input_ids=inputs, attention_mask=mask, do_sample=True,
                                     temperature=spec.temperature, top_p=spec.top_p, top_k=spec.top_k,
                                     max_new_tokens=spec.max_new_tokens, num_return_sequences=k,
                                     pad_token_id=gen.pad_id)
        new = out[:, width:]
        tokens += kept_tokens(new, gen.eos_ids)
        _ = gen.tokenizer.batch_decode(new, skip_special_tokens=True)
    return time.perf_counter() - start, tokens


def ours(gen: TransformersGenerator, prompts: list[Prompt], k: int) -> tuple[float, int]:
    requests = [GenerationRequest(p, s, derive_seed(0, p.id, s)) for p in prompts for s in range(k)]
    start = time.perf_counter()
    outs = gen.generate(requests)
    elapsed = time.perf_counter() - start
    assert all(o.error is None for o in outs), [o.error for o in outs if o.error][:3]
    return elapsed, sum(o.n_tokens for o in outs)


def run_case(name: str, spec: GenerationSpec, prompts_fn, n: int, table: Table, naive_n: int,  # type: ignore[no-untyped-def]
             repeats: int) -> None:
    gen = TransformersGenerator(spec)
    lock_step = TransformersGenerator(dataclasses.replace(spec, options=(("continuous", "false"),)))
    prompts = prompts_fn(n, gen)
    k = spec.samples
    avg_len = sum(len(gen.encode(p)[0]) for p in prompts) / len(prompts)
    ours(gen, prompts[:1], k)  # warm-up (allocator, kernels)
    subset = prompts[: naive_n or len(prompts)]
    methods = [
        ("naive generate(num_return_sequences=K) per prompt", len(subset), lambda: naive(gen, subset, k, spec)),
        (f"HF batched generate (batch {spec.batch_size} prompts x K)", len(prompts),
         lambda: batched(gen, prompts, k, spec, spec.batch_size)),
        ("polytox lock-step loop (continuous=false)", len(prompts), lambda: ours(lock_step, prompts, k)),
        (f"polytox (slots {spec.batch_size} x K, continuous batching)", len(prompts), lambda: ours(gen, prompts, k)),
    ]
    # Interleaved repeats, best time kept: a shared machine's load drifts, and every method gets the
    # same chances at a quiet moment.
    best: dict[int, tuple[float, int]] = {}
    for _ in range(max(1, repeats)):
        for i, (_label, _n, fn) in enumerate(methods):
            seconds, tokens = fn()
            if i not in best or seconds < best[i][0]:
                best[i] = (seconds, tokens)
    rows = [(label, n_prompts, *best[i]) for i, (label, n_prompts, _fn) in enumerate(methods)]
    base_naive = rows[0][3] / rows[0][2]
    base_batched = rows[1][3] / rows[1][2]
    for i, (label, n_prompts, seconds, tokens) in enumerate(rows):
        tps = tokens / seconds
        table.add_row(name if i == 0 else "", f"{n_prompts} x {k}", f"{avg_len:.0f}" if i == 0 else "", label,
                      f"{seconds:.1f}", f"{n_prompts * k / seconds:.1f}", f"{tps:.0f}",
                      f"{tps / base_naive:.2f}x", f"[bold]{tps / base_batched:.2f}x[/bold]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rtp-prompts", type=int, default=8)
    parser.add_argument("--ptp-prompts", type=int, default=3)
    parser.add_argument("--rtp-batch", type=int, default=0, help="prompts per batch (0: all RTP prompts)")
    parser.add_argument("--ptp-batch", type=int, default=0, help="prompts per batch (0: all PTP-like prompts)")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="interleaved repeats; the best time is kept")
    parser.add_argument("--naive-prompts", type=int, default=0, help="run the naive loop on this many (0: all)")
    parser.add_argument("--case", choices=["rtp", "ptp", "both"], default="both")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    table = Table(title=f"Generation throughput, SmolLM2-135M-Instruct, CPU ({torch.get_num_threads()} threads)")
    for col in ("case", "prompts x K", "prompt tokens", "method", "seconds", "generations/s", "tokens/s",
                "vs naive", "vs batched generate"):
        table.add_column(col)
    if args.case in ("rtp", "both"):
        spec = GenerationSpec(samples=25, top_p=0.9, temperature=1.0, max_new_tokens=20,
                              batch_size=args.rtp_batch or args.rtp_prompts)
        run_case("RTP (K=25, 20 tok)", spec, lambda n, g: rtp_prompts(n), args.rtp_prompts, table,
                 args.naive_prompts, args.repeats)
    if args.case in ("ptp", "both"):
        spec = GenerationSpec(samples=10, top_p=1.0, temperature=0.7, max_new_tokens=32,
                              batch_size=args.ptp_batch or args.ptp_prompts)
        run_case("PTP-like (K=10, ~400-tok prompts, 32 tok)", spec, lambda n, g: long_prompts(n, g.tokenizer),
                 args.ptp_prompts, table, args.naive_prompts,
                 args.repeats)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
