"""``polytox serve`` throughput and latency at concurrency 1/8/64, against the simple baselines, in one run.

Rows, for one scorer (cache off, so every request is really scored), on real RTP prompts
(../shared/data/rtp, English):

- ``direct, 1 text/call``: the scorer called in-process one text at a time (what a naive server does per
  request, without HTTP): the simple baseline;
- ``direct, batch B``: in-process calls of B texts (the ceiling micro-batching can approach);
- ``serve, no batching``: ``polytox serve --max-batch 1`` (one scorer call per request), over HTTP;
- ``serve, micro-batched``: ``polytox serve`` with its defaults (batches of up to 64, 2 ms wait).

Servers run as real ``polytox serve`` processes on 127.0.0.1; the closed-loop load generator
(``polytox.serve.loadgen``) runs in this process, each client thread on a keep-alive connection, and
checks every answer against the score computed directly for its text alone, one text per call (its
sequential answer; ``mismatched`` must be 0). The ``default`` scorer runs on CUDA where there is one.
Throughput is successful requests per second; p50/p99 are request latencies. Nothing here is a test.

``--random-backbone`` serves with a randomly initialised backbone of gemma-3-270m's shape (18 layers,
hidden size 640, 262,144-token vocabulary) and the real head, written as the backbone's converted copy
under a temporary ``POLYTOX_CACHE_DIR``, so a GPU machine needs no model wheel: the cost of a request
does not depend on the weights. Its tokenizer is synthetic (words and punctuation, one token each, a BOS
first), so token counts are close to, not equal to, gemma's; answers are checked as above.

``--overload B`` measures load shedding instead: the server's capacity (closed loop at concurrency 64,
successful requests per second), then an offered rate of twice that (paced clients, enough of them to keep
the rate while requests wait) against the server with ``--max-queue-wait B`` and with it off (0). Rows:
the offered and answered rates, the 429s, and p50/p99 of the answered (200) requests, which with the bound
should stay near B while without it they grow with the queue.

Usage: python benchmarks/bench_serve.py [--scorer default] [--scorer-opt K=V ...] [--seconds 10]
       [--concurrency 1,8,64] [--servers unbatched,micro] [--random-backbone] [--json out.json]
       python benchmarks/bench_serve.py --scorer svm --overload 1.0 --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from polytox.scoring import build_scorer
from polytox.serve.loadgen import run_load

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "rtp"
KEY = "bench-key"
GEMMA_270M = {  # gemma-3-270m's text config (the shape the head was trained on)
    "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262_144, "max_position_embeddings": 32_768,
    "sliding_window": 512, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
    "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
}


def random_backbone(cache_dir: Path, shape: dict[str, Any] | None = None, backbone: str = "gemma-3-270m") -> Path:
    """A random-weight model of ``shape`` and a synthetic tokenizer, as ``backbone``'s converted copy under
    ``cache_dir`` (what ``polytox.models.resolve_model`` loads when ``POLYTOX_CACHE_DIR`` is ``cache_dir``)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, PreTrainedTokenizerFast

    shape = dict(shape or GEMMA_270M)
    target = cache_dir / "models" / backbone
    specials = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
    vocab = {**specials, **{f"w{i}": i for i in range(len(specials), shape["vocab_size"])}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # words and punctuation runs, one token each
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 2)])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
                                     pad_token="<pad>", model_max_length=shape["max_position_embeddings"])
    hf_tok.save_pretrained(target)
    config = Gemma3TextConfig(**shape, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    torch.manual_seed(0)
    Gemma3ForCausalLM(config).to(torch.bfloat16).save_pretrained(target, safe_serialization=True)
    return target


def load_texts(n: int, folder: Path = SHARED) -> list[str]:
    texts: list[str] = []
    for name in ("toxic.jsonl", "nontoxic.jsonl"):
        with (folder / name).open(encoding="utf-8") as f:
            for line in f:
                text = json.loads(line)["prompt"]["text"].strip()
                if text:
                    texts.append(text)
                if len(texts) >= n * (1 if name == "nontoxic.jsonl" else 0.5):
                    break
    return texts[:n]


def start_server(scorer: str, options: list[str], port: int, extra: list[str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "polytox.cli.main", "serve", "--scorer", scorer, "--port", str(port),
           "--scorer-opt", "cache=off", *[a for o in options for a in ("--scorer-opt", o)], *extra]
    env = {**os.environ, "POLYTOX_SERVE_KEYS": KEY, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"polytox serve exited: {err[-2000:]}") from None
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("polytox serve did not start")


def batch_totals(port: int) -> tuple[float, float]:
    """(texts, scorer calls) so far, from the server's Prometheus metrics."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    total = re.search(r"^polytox_serve_batch_size_sum ([0-9.e+]+)$", text, re.M)
    count = re.search(r"^polytox_serve_batch_size_count ([0-9.e+]+)$", text, re.M)
    return (float(total.group(1)) if total else 0.0), (float(count.group(1)) if count else 0.0)


def mean_batch(now: tuple[float, float], before: tuple[float, float]) -> float:
    calls = now[1] - before[1]
    return (now[0] - before[0]) / calls if calls else float("nan")


def direct_rows(scorer: Any, texts: list[str], batch: int, seconds: float) -> dict[str, Any]:
    latencies, n, start = [], 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        chunk = [texts[(n + i) % len(texts)] for i in range(batch)]
        t = time.perf_counter()
        scorer.score(chunk, ["en"] * len(chunk))
        latencies.append(time.perf_counter() - t)
        n += batch
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {"texts_per_s": n / elapsed, "p50_ms": latencies[len(latencies) // 2] * 1000,
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, "calls": len(latencies)}


def overload(args: argparse.Namespace, texts: list[str], expected: dict[str, float], console: Console) -> None:
    """Capacity, then twice it with ``--max-queue-wait args.overload`` and with the bound off (module doc)."""
    url = f"http://127.0.0.1:{args.port}"
    table = Table(title=f"polytox serve at twice its capacity, scorer {args.scorer}, {args.seconds:.0f} s per row")
    for col in ("--max-queue-wait", "offered req/s", "answered req/s", "200", "429", "other", "p50 ms (200)",
                "p99 ms (200)", "mismatched"):
        table.add_column(col, justify="right")
    rows = []
    for bound in (args.overload, 0.0):
        proc = start_server(args.scorer, args.scorer_opt, args.port, ["--max-queue-wait", str(bound)])
        try:
            run_load(url, texts, concurrency=8, duration_s=min(args.warmup_seconds, 5), key=KEY, timeout=600)
            capacity = run_load(url, texts, concurrency=64, duration_s=args.seconds, key=KEY, timeout=600).throughput
            clients = min(args.overload_clients, max(64, int(2 * capacity * (max(bound, 1.0) + 1))))
            res = run_load(url, texts, concurrency=clients, requests=int(2 * capacity * args.seconds), key=KEY,
                           expected=expected, rate=2 * capacity, timeout=600, tolerance=args.tolerance)
        finally:
            proc.terminate()
            proc.wait(120)
        total = sum(res.statuses.values()) + res.transport_errors
        other = total - res.statuses[200] - res.statuses[429]
        row = {"bound_s": bound, "capacity": capacity, "offered": total / res.elapsed_s, "answered": res.throughput,
               "ok": res.statuses[200], "shed": res.statuses[429], "other": other, "p50_ms": res.percentile_ms(50),
               "p99_ms": res.percentile_ms(99), "mismatched": res.mismatched, "no_retry_after": res.no_retry_after}
        rows.append(row)
        table.add_row(f"{bound:g} s" if bound else "off", f"{row['offered']:.0f}", f"{row['answered']:.0f}",
                      str(row["ok"]), str(row["shed"]), str(other), f"{row['p50_ms']:.0f}", f"{row['p99_ms']:.0f}",
                      str(res.mismatched))
        console.print(f"--max-queue-wait {bound:g}: capacity {capacity:.0f} req/s, {clients} clients at "
                      f"{2 * capacity:.0f} req/s; 429s without Retry-After: {res.no_retry_after}")
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scorer", default="default")
    ap.add_argument("--scorer-opt", action="append", default=[])
    ap.add_argument("--seconds", type=float, default=10.0, help="load time per row")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--port", type=int, default=18931)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="largest |answer - direct score| still counted as the right answer (default 1e-4; "
                    "batch padding moves a transformer's scores by ~1e-6, a mixed-up answer by far more)")
    ap.add_argument("--warmup-seconds", type=float, default=60.0,
                    help="single-text calls on the texts before timing (first shapes are slow on CPU)")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--rtp", type=Path, default=SHARED,
                    help="the folder holding RTP's toxic.jsonl and nontoxic.jsonl (default: ../shared/data/rtp)")
    ap.add_argument("--servers", default="unbatched,micro",
                    help="which servers to load: unbatched (--max-batch 1), micro (the defaults)")
    ap.add_argument("--random-backbone", action="store_true",
                    help="a random-weight backbone of gemma-3-270m's shape, no model wheel needed (see above)")
    ap.add_argument("--overload", type=float, default=0.0, metavar="SECONDS",
                    help="measure load shedding at twice the capacity with --max-queue-wait SECONDS (see above)")
    ap.add_argument("--overload-clients", type=int, default=512,
                    help="most client threads for --overload (the load generator's own limit on a small machine)")
    args = ap.parse_args()
    if args.random_backbone:  # the scorer here and the servers (inheriting the environment) load it
        import atexit
        import shutil
        import tempfile

        cache = Path(tempfile.mkdtemp(prefix="polytox-bench-serve-"))
        atexit.register(shutil.rmtree, cache, True)  # half a GB of random weights
        random_backbone(cache)
        os.environ["POLYTOX_CACHE_DIR"] = str(cache)
    levels = [int(x) for x in args.concurrency.split(",")]
    texts = load_texts(args.texts, args.rtp)
    options = dict(o.split("=", 1) for o in args.scorer_opt)
    console = Console(width=150)

    scorer = build_scorer(args.scorer, {**options, "cache": "off"})
    console.print(f"scorer {scorer.id}; {len(texts)} RTP prompts; {os.cpu_count()} CPUs; {platform.processor()}")
    # Warm up with single-text calls first: on CPU, the first calls at each new input shape are many times
    # slower, and one huge batch before them slows the next single calls too. The servers get the same.
    warm_until = time.perf_counter() + args.warmup_seconds
    for text in texts:
        if time.perf_counter() > warm_until:
            break
        scorer.score([text], ["en"])
    rows: list[dict[str, Any]] = []
    for batch in () if args.overload else (1, 64):
        r = direct_rows(scorer, texts, batch, args.seconds)
        rows.append({"mode": f"direct, {batch} text{'s' if batch > 1 else ''}/call", "concurrency": "-",
                     "req_s": r["texts_per_s"], "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "batch": batch,
                     "statuses": f"{r['calls']} calls", "mismatched": 0, "max_diff": 0.0})
    expected: dict[str, float] = {}
    for text in texts:  # the reference every served answer is checked against: its sequential answer
        score = scorer.score([text], ["en"])[0]
        value = score.get("toxicity")
        if value is None:
            raise SystemExit(f"the scorer failed on a benchmark text: {score.error}")
        expected[text] = value
    scorer.close()
    if args.overload:
        overload(args, texts, expected, console)
        return

    servers = {"unbatched": ("serve, no batching", ["--max-batch", "1", "--max-wait-ms", "0"]),
               "micro": ("serve, micro-batched", [])}
    for label, extra in (servers[name] for name in args.servers.split(",")):
        proc = start_server(args.scorer, args.scorer_opt, args.port, extra)
        try:
            run_load(f"http://127.0.0.1:{args.port}", texts, concurrency=1, duration_s=args.warmup_seconds,
                     requests=len(texts), key=KEY, timeout=600)  # the same warm-up as the direct rows
            for c in levels:
                texts0, calls0 = batch_totals(args.port)
                res = run_load(f"http://127.0.0.1:{args.port}", texts, concurrency=c, duration_s=args.seconds,
                               key=KEY, expected=expected, timeout=600, tolerance=args.tolerance)
                rows.append({"mode": label, "concurrency": c, "req_s": res.throughput,
                             "p50_ms": res.percentile_ms(50), "p99_ms": res.percentile_ms(99),
                             "batch": mean_batch(batch_totals(args.port), (texts0, calls0)),
                             "statuses": ", ".join(f"{k}: {v}" for k, v in sorted(res.statuses.items())),
                             "mismatched": res.mismatched, "max_diff": res.max_diff,
                             "errors": sum(n for k, n in res.statuses.items() if k != 200) + res.transport_errors})
        finally:
            proc.terminate()
            proc.wait(120)

    backbone = ", random gemma-3-270m-shaped backbone" if args.random_backbone else ""
    table = Table(title=f"polytox serve, scorer {args.scorer} (cache off{backbone}), {args.seconds:.0f} s per row, "
                  f"tolerance {args.tolerance:g}")
    for col in ("mode", "concurrency", "req/s", "p50 ms", "p99 ms", "mean batch", "answers", "mismatched",
                "max |diff|"):
        table.add_column(col, justify="left" if col in ("mode", "answers") else "right")
    for r in rows:
        table.add_row(r["mode"], str(r["concurrency"]), f"{r['req_s']:.1f}", f"{r['p50_ms']:.1f}",
                      f"{r['p99_ms']:.1f}", f"{r['batch']:.1f}", r["statuses"], str(r["mismatched"]),
                      f"{r['max_diff']:.1e}")
    console.print(table)
    served = [r for r in rows if r["mode"].startswith("serve")]
    errors = sum(r["errors"] for r in served)
    wrong = sum(r["mismatched"] for r in served)
    console.print(f"served answers: {errors} errors (non-200 or transport), {wrong} different from their "
                  "sequential answer")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
