"""GPU throughput of the default scorer, end to end, and where its time goes.

Scores real texts: English continuations (``scorer-train/en-perspective.jsonl``: RTP continuations and
GPT-2/GPT-Neo generations, about 20 tokens each like RTP's K=25 samples) and RTP-LX texts in PTP's 17
languages, from ``../shared/data``. A machine without ``../shared`` reads a file that ``--export FILE``
wrote beforehand (``--texts FILE``). Every row starts cold
(no score or embedding cache, an empty n-gram word table), loading is timed apart, and each case runs
``--repeats`` times (the median is shown). Rows:

- parts: the n-gram part alone (``mode=ngram``, CPU), one batched tokenizer call, and the backbone's
  pools alone (``HiddenStateEmbedder.embed_and_probe``, tokenization included);
- ``polytox-ml`` full in float32 and bfloat16 over a range of ``lm_batch_size``;
- ``default`` (what ``polytox eval`` scores with) with its own defaults on this machine.

The issue's GPU target is 1,000 texts/s end to end. The bound column is the backbone's arithmetic alone at
the bf16 matrix rate measured here (tokens x 2 x the parameters of the layers run): scoring is not
arithmetic-bound, so that fraction says how far the rest (tokenization, n-grams, padding, launches) is
from the hardware.

``--random-backbone DIR``: the backbone's weights cannot travel to some machines (the 245 MB GGUF), so the
embedded backbone is rebuilt from its ``config.json`` and tokenizer files in DIR with random weights, in
a temporary cache. Throughput does not depend on the weights' values (same shapes, same tokens); the
scores, and so AUCs, are then meaningless and are not shown.

    python benchmarks/bench_scorer_gpu.py [--device cuda] [--n 4000] [--batch-sizes 32,128,256,512]
    python benchmarks/bench_scorer_gpu.py --export texts.jsonl   # for a machine without ../shared
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def export_texts(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` English continuations and ``n`` RTP-LX texts, seeded: {text, lang, set} rows."""
    from polytox.training.scorer.data import load_rtplx

    rng = random.Random(seed)
    with open(DATA / "scorer-train" / "en-perspective.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    conts = rng.sample([r for r in rows if r["kind"] in ("continuation", "generation")], n)
    lx = rng.sample(load_rtplx(DATA / "rtp-lx"), n)
    return ([{"text": r["text"], "lang": "en", "set": "en continuations"} for r in conts]
            + [{"text": e.text, "lang": e.lang, "set": "RTP-LX, 17 languages"} for e in lx])


def random_backbone(files: Path, cache: Path) -> None:
    """The embedded backbone's architecture with random weights, where the scorer looks for it."""
    import torch
    import transformers

    from polytox.models import EMBEDDED

    target = cache / "models" / EMBEDDED["gemma-3-270m"].name
    target.mkdir(parents=True)
    for path in files.iterdir():
        shutil.copy(path, target / path.name)
    config = transformers.AutoConfig.from_pretrained(target)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(target)


def layer_params(lm: Any, deepest: int) -> int:
    """Parameters of the decoder layers a pass runs (embeddings are a lookup, not arithmetic)."""
    from polytox.scoring.ml.embedder import decoder_layers

    return sum(p.numel() for block in decoder_layers(lm)[:deepest] for p in block.parameters())


def matmul_tflops(device: str) -> float | None:
    """bf16 matrix rate measured on this device (8192^3 products, random data), TFLOP/s."""
    import torch

    if not device.startswith("cuda"):
        return None
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn_like(a)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2 * 8192**3 / (time.perf_counter() - start) / 1e12


def timed(fn: Any, repeats: int, device: str) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs, the n-gram word table emptied before each."""
    import torch

    from polytox.scoring.ml import ngrams

    times = []
    for _ in range(repeats):
        ngrams._HASHERS.clear()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n", type=int, default=4000, help="texts per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", default="32,128,256,512", help="lm_batch_size values to time")
    parser.add_argument("--texts", help="a file written by --export (instead of ../shared/data)")
    parser.add_argument("--export", help="write the texts to this file and stop")
    parser.add_argument("--random-backbone", help="folder with the backbone's config and tokenizer files")
    args = parser.parse_args()
    if args.export:
        with open(args.export, "w", encoding="utf-8") as fh:
            for row in export_texts(args.n, args.seed):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    if args.texts:
        with open(args.texts, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh]
    else:
        rows = export_texts(args.n, args.seed)
    if not args.random_backbone:
        run(args, rows)
        return
    # The random backbone (about 0.7 GB) lives in a scratch cache that goes when the run ends, however it ends.
    with tempfile.TemporaryDirectory(prefix="polytox-bench-") as scratch:
        cache = Path(scratch)
        os.environ["POLYTOX_CACHE_DIR"] = str(cache)
        started = time.perf_counter()
        random_backbone(Path(args.random_backbone), cache)
        print(f"random-weight backbone built in {time.perf_counter() - started:.0f} s (scores not meaningful)")
        run(args, rows)


def run(args: argparse.Namespace, rows: list[dict[str, str]]) -> None:
    import torch

    from polytox.scoring import build_scorer
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    texts, langs = [r["text"] for r in rows], [r["lang"] for r in rows]
    tflops = matmul_tflops(args.device)
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    results: list[tuple[str, float, int]] = []  # label, seconds, tokens the backbone ran (0: none)
    sizes = [int(b) for b in args.batch_sizes.split(",")]

    ngram = PolytoxMlScorer(mode="ngram")
    probe_scorer = PolytoxMlScorer(device=args.device, dtype="bfloat16", embedding_cache="off")
    embedder = probe_scorer._embedder
    assert embedder is not None
    embedder._load()
    _, lengths = embedder._tokenize(texts)
    tokens = int(lengths.sum())
    flops = 2 * layer_params(embedder._lm, max(embedder.layers)) * tokens
    tok_s = timed(lambda: embedder._tokenize(texts), args.repeats, "cpu")
    results.append(("part: one batched tokenizer call", tok_s, 0))
    probes = [p for p in (probe_scorer.head.probe, probe_scorer.head.probe_en) if p is not None]
    for size in sizes:
        embedder.batch_size = size
        seconds = timed(lambda: embedder.embed_and_probe(texts, probes), args.repeats, args.device)
        results.append((f"part: backbone pools + probe, bf16, lm_batch_size {size}", seconds, tokens))
    probe_scorer.close()

    def case(label: str, scorer: Any) -> None:
        scorer.score(texts[:8], langs[:8])  # load the backbone and warm the kernels outside the timing
        seconds = timed(lambda: scorer.score(texts, langs), args.repeats, args.device)
        results.append((label, seconds, tokens if scorer_runs_backbone(scorer) else 0))
        print(f"{label}: {len(texts) / seconds:.0f} texts/s", flush=True)
        scorer.close()

    case("part: n-gram part alone (mode=ngram)", ngram)
    for dtype in ("float32", "bfloat16"):
        for size in sizes:
            if dtype == "float32" and size not in (32, max(sizes)):  # float32 at the ends only
                continue
            case(f"polytox-ml full, {dtype}, lm_batch_size {size}",
                 PolytoxMlScorer(device=args.device, dtype=dtype, lm_batch_size=size))
    case("default (eval's scorer), its defaults on this machine", build_scorer("default", {"cache": "off"}))
    report(args, gpu, tflops, flops, tokens, len(texts), results)


def scorer_runs_backbone(scorer: Any) -> bool:
    inner = getattr(scorer, "scorers", {}).get("polytox-ml", scorer)
    return getattr(inner, "_embedder", None) is not None


def report(args: argparse.Namespace, gpu: str, tflops: float | None, flops: float, tokens: int, n: int,
           results: list[tuple[str, float, int]]) -> None:
    print(f"\n{gpu}; {n} real texts ({tokens} backbone tokens, {tokens / n:.1f} per text), median of "
          f"{args.repeats} cold runs" + (f"; bf16 matrix rate measured {tflops:.0f} TFLOP/s" if tflops else ""))
    print("| stage | seconds | texts/s | vs 1,000 texts/s target | backbone arithmetic bound |")
    print("|---|---|---|---|---|")
    for label, seconds, ran in results:
        bound = f"{flops / (tflops * 1e12) / seconds:.2%}" if tflops and ran else "-"
        print(f"| {label} | {seconds:.3f} | {n / seconds:.0f} | {n / seconds / 1000:.2f}x | {bound} |")


if __name__ == "__main__":
    main()
