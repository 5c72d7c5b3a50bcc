"""GPU throughput: vLLM backend vs transformers, polytox end-to-end vs vLLM alone, and the bandwidth roofline.

Needs a CUDA GPU and ``pip install 'polytox[vllm,hf,svm]'``. Offline: the model is a randomly initialised
Llama-style model of a real size (default: Llama-3.2-1B's layers with a 32K vocabulary, 1.04B
parameters, bfloat16) with a synthetic word-level tokenizer, written to a temporary folder. Random
weights are fine for throughput: decoding cost does not depend on the values, and EOS is almost never
drawn, so lengths are ~max_new_tokens.

Each measurement runs in its own subprocess (one CUDA context / vLLM engine at a time), engine start-up
excluded, and prints one table:

1. vLLM alone: ``LLM.generate`` on all prompts in one call, ``SamplingParams(n=K)`` (vLLM's best case);
2. polytox end-to-end: ``evaluate()`` with the vLLM backend (engine pre-built), pipelined executor,
   scoring with the SVM scorer (or the fake one), writing the run store: target >= 0.9x of (1) in tokens/s;
3. the polytox transformers backend, once per ``--variants`` entry (e.g. ``";compile=false;compile=true"``:
   the defaults, then two variants), beside HF batched ``generate`` with its dynamic cache and with a static
   cache (``cache_implementation="static"``, which makes transformers compile the forward pass), on the
   same prompts (left-padded batches of 256 // K prompts, ``num_return_sequences=K``, same sampling
   settings), and the naive loop (one ``generate(K)`` per prompt). Every method runs twice over the same
   prompts: the first pass starts right after loading (every capture and compilation inside it), the
   second is the steady state; each row has both, its ratio to the better HF row of each pass, and its
   share of the roofline (``roofline``) at the rows that method actually decoded per step (polytox: its
   slot plan; HF: 256 // K prompts x K): a decode step over R rows reads the weights once plus each row's
   filled KV cache and computes ``2 * matmul_params`` FLOPs a row plus attention, so each phase takes the
   larger of FLOPs / peak (datasheet bf16 TFLOP/s, else a measured GEMM) and bytes / measured bandwidth;
4. batch-1 decoding with vLLM vs the memory-bandwidth bound: each decoding step reads every weight once,
   so tokens/s <= bandwidth / weight bytes. Bandwidth is measured (device-to-device copy) and the
   datasheet value is shown when the GPU is known.

    python benchmarks/bench_gpu.py [--prompts 1024] [--samples 10] [--max-new-tokens 128] [--shard-size 256]
    python benchmarks/bench_gpu.py --case rtp --skip-vllm   # K=25, 20 tokens, top_p 0.9, ~32-token prompts
    python benchmarks/bench_gpu.py --case ptp --skip-vllm   # K=10, 400-token prompts, 128 tokens
    python benchmarks/bench_gpu.py --skip-vllm --hf-fraction 1 --cases rtp:128,ptp:32   # several cases, one model
    python benchmarks/bench_gpu.py --tiny --device cpu --skip-vllm   # smoke test of the script, no GPU
    benchmarks/gpu_rows.sh issue48   # the rows of docs/benchmarks.md: ROW_PLAN, 128K vocabulary, both samplers
    benchmarks/gpu_rows.sh round5    # RTP 1,024 + profile, PTP 128 every method, serve: one 9-minute window
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATASHEET_GBS = {  # memory bandwidth, GB/s, from the vendors' datasheets
    "H200": 4800, "H100 SXM": 3350, "H100 80GB HBM3": 3350, "H100 PCIe": 2000, "H100 NVL": 3900,
    "A100-SXM4-80GB": 2039, "A100-SXM4-40GB": 1555, "A100 80GB PCIe": 1935, "A100-PCIE-40GB": 1555,
    "L40S": 864, "A10G": 600, "L4": 300, "RTX 4090": 1008,
}
PEAK_TFLOPS_BF16 = {  # dense bf16 tensor-core peak, TFLOP/s, from the vendors' datasheets (no sparsity)
    "H200": 989, "H100 SXM": 989, "H100 80GB HBM3": 989, "H100 PCIe": 756, "H100 NVL": 835,
    "A100-SXM4-80GB": 312, "A100-SXM4-40GB": 312, "A100 80GB PCIe": 312, "A100-PCIE-40GB": 312,
}
LLAMA_1B = {  # Llama-3.2-1B's layer shapes with a 32K vocabulary: 1.04B parameters (--vocab-size 128256: 1.24B)
    "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 32_000, "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 512,
        "tie_word_embeddings": True}


# ---- the model --------------------------------------------------------------------------------------
def build_model(path: Path, shape: dict[str, Any], dtype: str, logit_scale: float = 1.0) -> None:
    """A random Llama-style model + a word-level tokenizer whose vocabulary matches the model's.

    ``logit_scale`` multiplies the (tied) embeddings, hence the logits: above 1 the next-token
    distributions get peaked like a trained model's (small top-p nuclei) instead of near uniform."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, shape["vocab_size"])}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                     unk_token="<unk>")
    hf_tok.save_pretrained(path)
    config = LlamaConfig(**shape, bos_token_id=0, eos_token_id=1, torch_dtype=dtype)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    if logit_scale != 1.0:
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(logit_scale)
    model.to(getattr(torch, dtype)).save_pretrained(path, safe_serialization=True)


CASES = {  # issue settings: RTP (short prompts, K=25) and PTP-like (long prompts, K=10)
    "rtp": {"samples": 25, "max_new_tokens": 20, "top_p": 0.9, "temperature": 1.0, "prompt_tokens": 32},
    "ptp": {"samples": 10, "max_new_tokens": 128, "top_p": 1.0, "temperature": 0.7, "prompt_tokens": 400},
}


def make_prompts(n: int, vocab: int, length: int = 32) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(0)
    return [" ".join(f"w{int(i)}" for i in rng.integers(3, vocab, size=length)) for _ in range(n)]


# ---- parts (each in its own process) -----------------------------------------------------------------
def part_bandwidth(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    x = torch.empty(2 * 1024**3 // 2, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    reps = 20
    for _ in range(reps):
        y.copy_(x)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    x_bytes = x.numel() * 2
    name = torch.cuda.get_device_name(0)
    sheet = next((v for k, v in DATASHEET_GBS.items() if k.lower() in name.lower()), None)
    del x, y
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        a @ a
    torch.cuda.synchronize()
    tflops = 2 * 8192**3 * reps / (time.perf_counter() - start) / 1e12
    peak = next((v for k, v in PEAK_TFLOPS_BF16.items() if k.lower() in name.lower()), None)
    return {"gpu": name, "measured_gbs": 2 * x_bytes * reps / seconds / 1e9, "datasheet_gbs": sheet,
            "measured_tflops": tflops, "datasheet_tflops": peak,
            "memory_gib": torch.cuda.get_device_properties(0).total_memory / 1024**3}


def _llm(args: argparse.Namespace) -> Any:
    from vllm import LLM

    return LLM(model=args.model_dir, dtype=args.dtype, seed=0, max_model_len=args.max_model_len,
               gpu_memory_utilization=args.gpu_memory_utilization)


def part_vllm_only(args: argparse.Namespace) -> dict[str, Any]:
    from vllm import SamplingParams

    llm = _llm(args)
    tok = llm.get_tokenizer()
    prompts = [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]}
               for p in make_prompts(args.prompts, args.vocab, args.prompt_tokens)]
    params = [SamplingParams(n=args.samples, seed=i, temperature=args.temperature, top_p=args.top_p,
                             max_tokens=args.max_new_tokens) for i in range(len(prompts))]
    llm.generate(prompts[:8], params[:8], use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(o.token_ids) for r in outputs for o in r.outputs)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def part_vllm_batch1(args: argparse.Namespace) -> dict[str, Any]:
    from vllm import SamplingParams

    llm = _llm(args)
    tok = llm.get_tokenizer()
    prompt = {"prompt_token_ids": tok(make_prompts(1, args.vocab)[0], add_special_tokens=False)["input_ids"]}
    params = SamplingParams(n=1, seed=0, temperature=0.7, max_tokens=args.max_new_tokens, ignore_eos=True)
    llm.generate([prompt], [params], use_tqdm=False)
    start = time.perf_counter()
    out = llm.generate([prompt], [params], use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = len(out[0].outputs[0].token_ids)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def _spec(args: argparse.Namespace, backend: str, prompts_file: Path, scorer: str) -> Any:
    from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec

    options = (("max_model_len", str(args.max_model_len)),
               ("gpu_memory_utilization", str(args.gpu_memory_utilization))) if backend == "vllm" else ()
    if backend == "transformers" and args.model_opts:  # one backend variant (--variants)
        options = tuple(tuple(item.split("=", 1)) for item in args.model_opts.split(","))  # type: ignore[misc]
    return EvalSpec(prompts=PromptSpec(source=str(prompts_file), format="generic"),
                    generation=GenerationSpec(model=args.model_dir, backend=backend, samples=args.samples,
                                              max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                              top_p=args.top_p,
                                              dtype=args.dtype, device=args.device, chat_template="never",
                                              options=options),
                    scorer=ScorerSpec(name=scorer, options=(("cache", "off"),)), shard_size=args.shard_size)


def _prompts_file(args: argparse.Namespace, n: int) -> Path:
    path = Path(args.workdir) / f"prompts-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, text in enumerate(make_prompts(n, args.vocab, args.prompt_tokens)):
            fh.write(json.dumps({"id": f"b{i:06d}", "text": text, "lang": "en"}) + "\n")
    return path


def _scorer_name() -> str:
    try:
        import profanity_check  # noqa: F401
    except ImportError:
        return "fake"
    return "svm"


def part_polytox_e2e(args: argparse.Namespace) -> dict[str, Any]:
    from polytox import registry
    from polytox.executors import ExecutorConfig
    from polytox.generation.vllm_backend import VLLMGenerator
    from polytox.runner import execute_run as evaluate

    scorer = _scorer_name()
    spec = _spec(args, "vllm", _prompts_file(args, args.prompts), scorer)
    built = VLLMGenerator(spec.generation)  # engine start-up outside the timed region, as for vLLM alone
    built.close = lambda: None  # type: ignore[method-assign]  # the warm-up run must not free the engine

    class Prebuilt(VLLMGenerator):
        def __new__(cls, gen_spec: Any) -> Any:  # the runner's factory call returns the warm engine
            return built

    registry.register("generator", "vllm", Prebuilt)  # type: ignore[arg-type]
    warm = _prompts_file(args, 8)
    evaluate(_spec(args, "vllm", warm, scorer), Path(args.workdir) / "warm")
    out = Path(args.workdir) / "e2e"
    start = time.perf_counter()
    result = evaluate(spec, out, executor=ExecutorConfig(kind="pipelined"))
    seconds = time.perf_counter() - start
    import pyarrow.parquet as pq

    tokens = int(sum(pq.read_table(out / "generations", columns=["n_tokens"]).column(0).to_pylist()))
    stats = json.loads((out / "manifest.json").read_text())["executor"]
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "scorer": scorer,
            "wait_for_scores_seconds": stats["wait_for_scores_seconds"],
            "emt": result.metrics["overall"]["emt"]}


def part_transformers(args: argparse.Namespace) -> dict[str, Any]:
    """The polytox backend over the shards of ``n`` prompts, twice: the first pass starts right after the model
    is loaded (every capture or compilation inside it), the second is the steady state."""
    n = max(1, args.prompts // args.hf_fraction)
    from polytox.executors.shards import generate_shard
    from polytox.generation import build_generator
    from polytox.prompts import load_prompts

    spec = _spec(args, "transformers", _prompts_file(args, n), "fake")
    prompts = load_prompts(spec.prompts).prompts
    gen = build_generator(spec.generation)
    plan_run = getattr(gen, "plan_run", None)
    if plan_run is not None:  # as the executor does: the run's size, for compile=auto
        plan_run(2 * n * args.samples)
    passes, tokens = [], 0
    for k in range(2):
        profiler = _profiler(args) if k == 1 and args.profile_dir and not args.model_opts else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.__enter__()
        tokens = sum(g.n_tokens for i in range(0, n, args.shard_size)
                     for g in generate_shard(gen, prompts[i : i + args.shard_size], spec))
        passes.append(time.perf_counter() - start)
        if profiler is not None:  # the steady pass, profiled (its time is not the one reported above)
            profiler.__exit__(None, None, None)
            events = profiler.key_averages()
            table = events.table(sort_by="self_device_time_total" if args.device != "cpu"
                                 else "self_cpu_time_total", row_limit=25)
            Path(args.profile_dir, f"profile-{args.case}-{n}.txt").write_text(table)
            title = (f"{args.case}, {n} prompts x K={args.samples}, steady pass of the default, "
                     f"{_device_name(args.device)}")
            Path(args.profile_dir, f"profile-{args.case}-{n}.md").write_text(
                profile_markdown(profile_rows(events, args.device), title))
            passes[-1] = _timed_pass(gen, prompts, spec, args, n)
    info = gen.describe()
    keep = ("decode_mode", "decode_mode_reason", "decode_shapes", "graph_captures", "graph_capture_seconds",
            "compile_error", "sampler", "sampler_fallback", "sampler_fallback_overflows", "attention_kernels",
            "attention_table", "slot_plan")
    return {"seconds": passes[1], "first_pass_seconds": passes[0], "tokens": tokens,
            "tokens_per_s": tokens / passes[1], "prompts": n,
            "rows": min((info.get("slot_plan") or {}).get("rows") or hf_rows(args.samples), n * args.samples),
            "label": "polytox transformers backend" + (f" [{args.model_opts}]" if args.model_opts else " [default]"),
            **{k: info[k] for k in keep if k in info}}


def _profiler(args: argparse.Namespace) -> Any:
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=activities)


def _device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"


def profile_rows(events: Any, device: str) -> list[tuple[str, int, float]]:
    """(name, calls, self time in microseconds) of each profiled kernel (CUDA) or operator (CPU) that took time.

    On CUDA only the device's own events (kernels, copies) count: an operator's row would count its kernels'
    time a second time."""
    attr = "self_device_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    if device.startswith("cuda"):
        from torch.autograd import DeviceType

        events = [e for e in events if getattr(e, "device_type", None) == DeviceType.CUDA] or events
    rows = [(e.key, int(e.count), float(getattr(e, attr, 0.0) or 0.0)) for e in events]
    return [r for r in rows if r[2] > 0]


def profile_markdown(rows: list[tuple[str, int, float]], title: str, top: int = 20) -> str:
    """The ``top`` rows by self time as a markdown table: calls, milliseconds, share of all, microseconds a call."""
    total = sum(r[2] for r in rows) or 1.0
    ranked = sorted(rows, key=lambda r: -r[2])
    lines = [f"Top {min(top, len(ranked))} of {len(ranked)} by self time ({total / 1e3:,.1f} ms in all): {title}", "",
             "| # | kernel | calls | ms | share | us a call |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for i, (name, calls, us) in enumerate(ranked[:top], 1):
        short = name.replace("|", "/")[:90]
        lines.append(f"| {i} | `{short}` | {calls:,} | {us / 1e3:,.1f} | {us / total:.1%} | "
                     f"{us / max(1, calls):,.1f} |")
    shown = sum(r[2] for r in ranked[:top])
    lines.append(f"| | the other {max(0, len(ranked) - top)} | | {(total - shown) / 1e3:,.1f} | "
                 f"{(total - shown) / total:.1%} | |")
    return "\n".join(lines) + "\n"


def _timed_pass(gen: Any, prompts: list[Any], spec: Any, args: argparse.Namespace, n: int) -> float:
    from polytox.executors.shards import generate_shard

    start = time.perf_counter()
    for i in range(0, n, args.shard_size):
        generate_shard(gen, prompts[i : i + args.shard_size], spec)
    return time.perf_counter() - start


def _hf_model(args: argparse.Namespace) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=getattr(torch, args.dtype))
    return tok, model.to(args.device).eval()


def _hf_run(args: argparse.Namespace, tok: Any, model: Any, chunk: list[str], **extra: Any) -> int:
    """One ``model.generate`` on a left-padded batch, K samples per prompt; tokens up to the first EOS."""
    import torch

    enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(args.device)
    with torch.inference_mode():
        out = model.generate(**enc, do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0,
                             max_new_tokens=args.max_new_tokens, num_return_sequences=args.samples,
                             pad_token_id=tok.eos_token_id, **extra)
    new = out[:, enc["input_ids"].shape[1]:]
    return int(((new == tok.eos_token_id).cumsum(dim=1) == 0).sum())


def _hf_passes(args: argparse.Namespace, n: int, **extra: Any) -> dict[str, Any]:
    """HF ``generate`` over ``n`` prompts in batches of 256 // K prompts (K rows each), twice: the first pass
    right after loading (any compilation inside it), the second the steady state."""
    import torch

    tok, model = _hf_model(args)
    texts = make_prompts(n, args.vocab, args.prompt_tokens)
    batch = max(1, 256 // args.samples)
    passes, tokens = [], 0
    for _ in range(2):
        start = time.perf_counter()
        tokens = sum(_hf_run(args, tok, model, texts[i : i + batch], **extra) for i in range(0, n, batch))
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        passes.append(time.perf_counter() - start)
    return {"seconds": passes[1], "first_pass_seconds": passes[0], "tokens": tokens,
            "tokens_per_s": tokens / passes[1], "prompts": n, "rows": min(hf_rows(args.samples), n * args.samples)}


def part_hf_batched(args: argparse.Namespace) -> dict[str, Any]:
    """HF batched generate (dynamic cache) on the same prompts as the transformers part."""
    return _hf_passes(args, max(1, args.prompts // args.hf_fraction))


def part_hf_static(args: argparse.Namespace) -> dict[str, Any]:
    """HF batched generate with a static cache, which makes ``generate`` compile the forward pass
    (transformers' auto-compile: ``torch.compile(mode="reduce-overhead")``, CUDA graphs) on CUDA."""
    return _hf_passes(args, max(1, args.prompts // args.hf_fraction), cache_implementation="static")


def part_hf_naive(args: argparse.Namespace) -> dict[str, Any]:
    """The naive loop: one ``generate(num_return_sequences=K)`` per prompt, on fewer prompts (it is slow)."""
    n = max(1, args.prompts // args.hf_fraction // 8)
    tok, model = _hf_model(args)
    texts = make_prompts(n, args.vocab, args.prompt_tokens)
    _hf_run(args, tok, model, texts[:1])
    start = time.perf_counter()
    tokens = sum(_hf_run(args, tok, model, [t]) for t in texts)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "prompts": n,
            "rows": args.samples}


PARTS = {"bandwidth": part_bandwidth, "vllm-only": part_vllm_only, "vllm-batch1": part_vllm_batch1,
         "polytox-e2e": part_polytox_e2e, "transformers": part_transformers, "hf-batched": part_hf_batched,
         "hf-static": part_hf_static, "hf-naive": part_hf_naive}


def run_part(name: str, args: argparse.Namespace, model_opts: str = "") -> dict[str, Any] | None:
    """One measurement in its own process, with its own (cold) inductor cache."""
    cmd = [sys.executable, __file__, "--part", name, *sys.argv[1:], "--model-opts", model_opts]
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="inductor-", dir=args.workdir)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[7:])
            result["process_seconds"] = time.perf_counter() - started
            return result
    print(f"[{name} {model_opts} failed, exit {proc.returncode}]\n{proc.stderr[-3000:]}", file=sys.stderr, flush=True)
    return None


def parse_cases(text: str) -> list[tuple[str, int | None]]:
    """``rtp,ptp:32,rtp:1024`` -> [(case, prompts or None)]."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, n = item.partition(":")
        if name not in CASES:
            raise SystemExit(f"bench_gpu: unknown case {name!r} (known: {', '.join(CASES)})")
        out.append((name, int(n) if n else None))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--case", choices=list(CASES), help="preset K / tokens / top_p / prompt length")
    parser.add_argument("--cases", default="",
                        help="several presets in one run, each 'case[:prompts]' (e.g. 'rtp:128,ptp:32,rtp:1024'); "
                             "the model is built once")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--hf-fraction", type=int, default=8, help="transformers runs prompts / this many")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model (smoke test of this script)")
    parser.add_argument("--vocab-size", type=int, default=0,
                        help="the model's vocabulary (default 32000; 128256: Llama-3.2-1B's, 1.24B parameters)")
    parser.add_argument("--logit-scale", type=float, default=1.0,
                        help="scale the random embeddings (and logits) so distributions are peaked, as a "
                             "trained model's; 1 = near-uniform next-token distributions")
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument("--skip", default="", help="comma-separated parts not to run (e.g. hf-naive,hf-static)")
    parser.add_argument("--variants", default="",
                        help="';'-separated transformers backend options to time, each 'k=v,k=v' (e.g. "
                             "';compile=false;compile=true'); empty = the defaults")
    parser.add_argument("--profile-dir", help="write a profile of the default backend's steady pass here "
                        "(torch profiler: the top kernels as a text table and a markdown table)")
    parser.add_argument("--model-cache", help="build the random model here, or reuse the one built here with the "
                        "same shape (several calls, one build)")
    parser.add_argument("--json", help="append every case's results here (one JSON object per line)")
    parser.add_argument("--model-opts", default="", help="(internal) one variant")
    parser.add_argument("--model-dir", help="(internal) the built model")
    parser.add_argument("--workdir", help="(internal)")
    parser.add_argument("--vocab", type=int, help="(internal)")
    parser.add_argument("--part", choices=list(PARTS), help="(internal) run one measurement")
    args = parser.parse_args()
    for key, value in CASES.get(args.case or "", {}).items():
        setattr(args, key, value)
    if args.part:
        print("RESULT " + json.dumps(PARTS[args.part](args)), flush=True)
        return
    cases = parse_cases(args.cases) if args.cases else [(args.case or "", None)]
    shape = dict(TINY if args.tiny else LLAMA_1B)
    if args.vocab_size:
        shape["vocab_size"] = args.vocab_size
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(args.model_cache) if args.model_cache else Path(tmp) / "model"
        start = time.perf_counter()
        stamp = json.dumps({"shape": shape, "dtype": args.dtype, "logit_scale": args.logit_scale}, sort_keys=True)
        if not args.model_cache or not (model_dir / "bench_shape.json").is_file() or (
                model_dir / "bench_shape.json").read_text() != stamp:
            build_model(model_dir, shape, args.dtype, args.logit_scale)
            (model_dir / "bench_shape.json").write_text(stamp)
        n_params = _count_params(shape)
        weight_bytes = n_params * (2 if args.dtype in ("bfloat16", "float16") else 4)
        print(f"model: random Llama-style, {n_params / 1e9:.2f}B parameters, {args.dtype}, "
              f"{weight_bytes / 1e9:.2f} GB of weights (built in {time.perf_counter() - start:.0f} s)", flush=True)
        base_argv = [a for a in sys.argv[1:] if not a.startswith("--cases=")]
        if "--cases" in base_argv:
            i = base_argv.index("--cases")
            del base_argv[i : i + 2]
        args.workdir = tmp
        bw = run_part("bandwidth", args) if args.device == "cuda" else None
        for case, n in cases:
            args.case = case or args.case
            if case:
                for key, value in CASES[case].items():
                    setattr(args, key, value)
            if n:
                args.prompts = n
            sys.argv = [sys.argv[0], *base_argv, *(["--case", case] if case else []),
                        *(["--prompts", str(n)] if n else []),
                        "--model-dir", str(model_dir), "--workdir", tmp, "--vocab", str(shape["vocab_size"])]
            skip = set(filter(None, args.skip.split(",")))
            names = ["transformers", "hf-batched", "hf-static", "hf-naive"] if args.skip_vllm else [
                p for p in PARTS if p != "bandwidth"]
            results: dict[str, dict[str, Any] | None] = {"bandwidth": bw}
            for name in [n_ for n_ in names if n_ not in skip]:
                runs = ([(f"transformers{k or ''}", v) for k, v in enumerate(args.variants.split(";"))]
                        if name == "transformers" else [(name, "")])
                for key, variant in runs:
                    results[key] = run_part(name, args, variant)
                    if args.json:  # as it comes: a window cut short keeps the parts measured
                        with open(args.json, "a", encoding="utf-8") as fh:
                            fh.write(json.dumps({"case": case, "prompts": args.prompts, "part": key,
                                                 "result": results[key]}) + "\n")
            report(results, args, weight_bytes, shape)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"case": case, "prompts": args.prompts, "results": results}) + "\n")


def _count_params(shape: dict[str, Any]) -> int:
    h, i = shape["hidden_size"], shape["intermediate_size"]
    layers, v = shape["num_hidden_layers"], shape["vocab_size"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * i + 2 * h
    return int(layers * per_layer + v * h * (1 if shape["tie_word_embeddings"] else 2) + h)


def _kv_bytes_per_token(shape: dict[str, Any], dtype: str) -> int:
    """Keys + values of one token over all layers."""
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    per = 2 if dtype in ("bfloat16", "float16") else 4
    return int(shape["num_hidden_layers"] * 2 * shape["num_key_value_heads"] * head_dim * per)


def matmul_params(shape: dict[str, Any]) -> int:
    """Parameters a token multiplies through: every layer's projections and the output head (not the lookup)."""
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    return int(layers * (h * h * 2 + h * kv * 2 + 3 * h * i) + shape["vocab_size"] * h)


def roofline(shape: dict[str, Any], dtype: str, *, prompts: int, prompt_tokens: int, new_tokens: int,
             tokens: int, rows: int, gbs: float, tflops: float) -> dict[str, Any]:
    """Least time for a run on a device of ``gbs`` GB/s and ``tflops`` TFLOP/s, decoding ``rows`` rows a step.

    Prefill: each prompt once, ``2 * matmul_params`` FLOPs a token plus causal attention, the weights read
    once. Decode: ``tokens`` tokens in ``tokens / rows`` steps; a step reads the weights once and each row
    its filled keys/values (prompt + half the continuation on average), and computes ``2 * matmul_params``
    plus ``4 * layers * hidden * context`` FLOPs a row. Each phase takes the larger of its compute and its
    memory time.
    """
    weight_bytes = _count_params(shape) * (2 if dtype in ("bfloat16", "float16") else 4)
    per_token = 2 * matmul_params(shape)
    attention = 4 * shape["num_hidden_layers"] * shape["hidden_size"]
    context = prompt_tokens + new_tokens / 2
    steps = tokens / max(1, rows)
    decode_flops = tokens * (per_token + attention * context)
    decode_bytes = steps * weight_bytes + tokens * context * _kv_bytes_per_token(shape, dtype)
    prefill_flops = prompts * (prompt_tokens * per_token + attention / 2 * prompt_tokens**2)
    compute = (decode_flops / (tflops * 1e12), prefill_flops / (tflops * 1e12))
    memory = (decode_bytes / (gbs * 1e9), weight_bytes / (gbs * 1e9))
    seconds = max(compute[0], memory[0]) + max(compute[1], memory[1])
    return {"seconds": seconds, "tokens_per_s": tokens / seconds if seconds else 0.0, "rows": rows,
            "decode_bound": "compute" if compute[0] >= memory[0] else "bandwidth",
            "flops": decode_flops + prefill_flops, "bytes": decode_bytes + weight_bytes}


ROW_PLAN = "rtp:128,rtp:1024,ptp:128"  # the rows of docs/benchmarks.md ("Generation on a GPU")


def row_settings(cases: str) -> list[dict[str, Any]]:
    """The settings of each ``case:prompts`` row, as ``main`` applies them (``CASES`` plus the prompt count)."""
    return [{"case": case, **CASES[case], **({"prompts": n} if n else {})} for case, n in parse_cases(cases)]


def hf_rows(samples: int) -> int:
    """Rows HF ``generate`` decodes at once here: batches of ``256 // K`` prompts, K rows each."""
    return max(1, 256 // samples) * samples


def report(results: dict[str, dict[str, Any] | None], args: argparse.Namespace, weight_bytes: int,
           shape: dict[str, Any]) -> None:
    bw = results.get("bandwidth")
    gpu = bw["gpu"] if bw else args.device
    print(f"\nGPU: {gpu}; {args.prompts} prompts x K={args.samples}, up to {args.max_new_tokens} new tokens, "
          f"shard size {args.shard_size}")
    base = (results.get("vllm-only") or {}).get("tokens_per_s")
    if results.get("vllm-only") or results.get("polytox-e2e"):
        print("| measurement | tokens | seconds | tokens/s | ratio |")
        print("|---|---|---|---|---|")
    for name, label in (("vllm-only", "vLLM alone (LLM.generate, one call)"),
                        ("polytox-e2e", "polytox eval, vLLM backend, pipelined scoring"),
                        ("transformers", "transformers")):
        r = results.get(name)
        if not r:
            continue
        if name == "polytox-e2e":
            label += f" ({r['scorer']} scorer; generation waited {r['wait_for_scores_seconds']:.2f} s for it)"
        if name == "transformers":
            label = f"{r['label']} ({r['prompts']} prompts)"
            if not base:
                continue  # shown in the transformers table below
        ratio = f"{r['tokens_per_s'] / base:.2f}x of vLLM alone" if base else "-"
        print(f"| {label} | {r['tokens']} | {r['seconds']:.1f} | {r['tokens_per_s']:.0f} | {ratio} |")
    _report_hf(results, args, shape, bw)
    b1 = results.get("vllm-batch1")
    if bw and b1:
        for which in ("measured_gbs", "datasheet_gbs"):
            if bw.get(which):
                bound = bw[which] * 1e9 / weight_bytes
                print(f"| batch-1 decode vs bandwidth bound ({which.split('_')[0]} {bw[which]:.0f} GB/s -> "
                      f"{bound:.0f} tokens/s) | {b1['tokens']} | {b1['seconds']:.2f} | "
                      f"{b1['tokens_per_s']:.0f} | {b1['tokens_per_s'] / bound:.0%} of the bound |")



def _report_hf(results: dict[str, dict[str, Any] | None], args: argparse.Namespace, shape: dict[str, Any],
               bw: dict[str, Any] | None) -> None:
    """Every transformers-based method's first pass and steady state, against the better HF row of each."""
    variants = sorted((n for n in results if n.startswith("transformers")), key=len)
    rows = [(n, lab) for n, lab in ([(v, "polytox transformers backend") for v in variants]
                                    + [("hf-batched", "HF batched generate, dynamic cache (256 // K prompts x K)"),
                                       ("hf-static", "HF batched generate, static cache + compiled forward"),
                                       ("hf-naive", "naive generate(num_return_sequences=K) per prompt")])
            if results.get(n)]
    if not rows:
        return
    gbs = (bw or {}).get("measured_gbs")
    tflops = (bw or {}).get("datasheet_tflops") or (bw or {}).get("measured_tflops")
    print(f"\n{args.case or 'custom'}: {args.prompts // args.hf_fraction} prompts, K={args.samples}, "
          f"{args.prompt_tokens}-token prompts, {args.max_new_tokens} new tokens, top_p {args.top_p}, "
          f"T {args.temperature}" + (f"; bandwidth {gbs:.0f} GB/s measured, {tflops:.0f} TFLOP/s bf16 "
                                     f"({bw['gpu']})" if gbs and tflops and bw else ""))
    hf = [results[n] for n in ("hf-batched", "hf-static") if results.get(n)]
    best_first = max((r["tokens"] / r.get("first_pass_seconds", r["seconds"]) for r in hf), default=None)
    best_steady = max((r["tokens_per_s"] for r in hf), default=None)
    print("| method | prompts | tokens | first pass s | first tok/s | steady s | steady tok/s "
          "| first vs best HF | steady vs best HF | steady of roofline (rows run, decode bound) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, label in rows:
        r = results[name] or {}
        if name.startswith("transformers"):
            label = r.get("label", label)
            if r.get("decode_mode"):
                label += f" -> {r['decode_mode']}, {r.get('decode_shapes', '?')} shapes"
            if r.get("compile_error"):
                label += f" [failed, ran eager: {str(r['compile_error'])[:200]}]"
        first = r.get("first_pass_seconds", r["seconds"])
        first_rate = r["tokens"] / first
        frac = "-"
        if gbs and tflops:
            roof = roofline(shape, args.dtype, prompts=r.get("prompts", 1), prompt_tokens=args.prompt_tokens,
                            new_tokens=args.max_new_tokens, tokens=r["tokens"],
                            rows=r.get("rows") or hf_rows(args.samples), gbs=gbs, tflops=tflops)
            frac = f"{roof['seconds'] / r['seconds']:.1%} ({roof['rows']} rows, {roof['decode_bound']})"
        vs_first = f"{first_rate / best_first:.2f}x" if best_first else "-"
        vs_steady = f"{r['tokens_per_s'] / best_steady:.2f}x" if best_steady else "-"
        print(f"| {label} | {r.get('prompts', '-')} | {r['tokens']} | {first:.1f} | {first_rate:.0f} | "
              f"{r['seconds']:.1f} | {r['tokens_per_s']:.0f} | {vs_first} | {vs_steady} | {frac} |", flush=True)
    for name, _ in rows:
        reason = (results[name] or {}).get("decode_mode_reason")
        if reason:
            print(f"  {(results[name] or {}).get('label')}: {reason}")


if __name__ == "__main__":
    main()
