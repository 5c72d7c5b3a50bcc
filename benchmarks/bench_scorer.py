"""Is scoring the bottleneck? Generation vs scoring time on the same shard, previous vs current scorer.

Generates K continuations of built-in demo prompts (English by default: the embedded SmolLM2 is English
only) with the default embedded SmolLM2 at RTP settings (K=25, 20 new tokens, top_p 0.9), then scores
exactly those continuations, all in one run:

- ``polytox-ml mode=ngram``: previous n-gram path (one ``HashingVectorizer`` pass over whole texts) vs
  current (distinct words hashed once, summed by a sparse product; identical features);
- ``polytox-ml`` full (n-grams + gemma-3-270m hidden states): previous (per-text tokenizer calls, float32)
  vs current float32 (one batched tokenizer call, vectorised padding) vs current ``dtype=auto``
  (bfloat16 where the hardware has it; its AUC effect: benchmarks/bench_scorer_bf16.py);
- ``default`` (what ``polytox eval`` uses: polytox-ml routed by language).

Scorers run with the score cache off, and the n-gram word table is emptied before each row, so every row
starts cold. Model loading is timed apart from scoring. CPU seconds (all threads of this process) are shown
next to wall time: on a shared machine they say more than wall time does. ``--device cuda`` times the GPU path.
Usage: python benchmarks/bench_scorer.py [--prompts 8] [--samples 25] [--lang en] [--device cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from legacy_embedder import embed_legacy
from polytox.generation.hf import TransformersGenerator
from polytox.prompts import demo_path
from polytox.scoring import build_scorer
from polytox.scoring.ml import ngrams
from polytox.scoring.ml import scorer as ml_scorer
from polytox.scoring.ml.embedder import resolve_dtype
from polytox.spec import GenerationSpec
from polytox.types import GenerationRequest, Prompt, derive_seed


def demo_prompts(n: int, langs: set[str]) -> list[Prompt]:
    """The first ``n`` demo prompts in ``langs``, taking each language in turn."""
    by_lang: dict[str, list[Prompt]] = {}
    with open(demo_path(), encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["lang"] in langs:
                by_lang.setdefault(rec["lang"], []).append(Prompt(id=rec["id"], text=rec["text"], lang=rec["lang"]))
    out: list[Prompt] = []
    depth = 0
    while len(out) < n and any(depth < len(v) for v in by_lang.values()):
        for prompts in by_lang.values():
            if depth < len(prompts) and len(out) < n:
                out.append(prompts[depth])
        depth += 1
    return out


@contextmanager
def previous_path(scorer: Any) -> Iterator[None]:
    """Run ``scorer`` as before: reference n-gram hashing and the legacy embedder path."""
    saved = ml_scorer.hashed_counts
    ml_scorer.hashed_counts = ngrams.hashed_counts_reference  # type: ignore[assignment]
    embedder = getattr(scorer, "_embedder", None)
    if embedder is not None:  # the instance attribute shadows the method the scorer calls
        embedder.embed_and_probe = partial(embed_legacy, embedder)
    try:
        yield
    finally:
        ml_scorer.hashed_counts = saved  # type: ignore[assignment]
        if embedder is not None:
            del embedder.embed_and_probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--lang", default="en", help="comma list of demo languages")
    parser.add_argument("--device", default="cpu", help="scorer device (cpu, cuda)")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = demo_prompts(args.prompts, set(args.lang.split(",")))
    spec = GenerationSpec(samples=args.samples, max_new_tokens=20, top_p=0.9, temperature=1.0)
    started = time.perf_counter()
    generator = TransformersGenerator(spec)
    load_gen = time.perf_counter() - started
    requests = [GenerationRequest(p, k, derive_seed(0, p.id, k)) for p in prompts for k in range(args.samples)]
    started, cpu_started = time.perf_counter(), time.process_time()
    generations = generator.generate(requests)
    gen_s, gen_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    generator.close()
    langs = {p.id: p.lang for p in prompts}
    texts = [g.text or "" for g in generations]
    text_langs = [langs[g.prompt_id] for g in generations]

    dev = {"device": args.device}
    cases: list[tuple[str, str, dict[str, Any], bool]] = [
        ("polytox-ml ngram, previous", "polytox-ml", {"mode": "ngram"}, True),
        ("polytox-ml ngram, current", "polytox-ml", {"mode": "ngram"}, False),
        ("polytox-ml full, previous (fp32)", "polytox-ml", {**dev, "dtype": "float32"}, True),
        ("polytox-ml full, current fp32", "polytox-ml", {**dev, "dtype": "float32"}, False),
        ("polytox-ml full, current dtype=auto", "polytox-ml", {**dev, "dtype": "auto"}, False),
        ("default (eval's scorer), current", "default", {}, False),
    ]
    rows: list[tuple[str, int, float, float, float]] = [
        ("generate (SmolLM2-135M)", len(texts), load_gen, gen_s, gen_cpu)]
    notes: list[str] = []
    for label, name, options, previous in cases:
        ngrams._HASHERS.clear()
        started = time.perf_counter()
        scorer = build_scorer(name, {**options, "cache": "off"})
        subset = [(t, lang) for t, lang in zip(texts, text_langs, strict=True) if scorer.supports(lang)]
        # The first call loads the backbone (converted once into the cache); warm it up outside the timing.
        scorer.score(["warm-up"], [subset[0][1]])
        load = time.perf_counter() - started
        ngrams._HASHERS.clear()
        with previous_path(scorer) if previous else _nothing():
            started, cpu_started = time.perf_counter(), time.process_time()
            scores = scorer.score([t for t, _ in subset], [lang for _, lang in subset])
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if "auto" in label:
            notes.append(f"dtype=auto ran the backbone in {resolve_dtype('auto', args.device)}")
        scorer.close()
        assert len(scores) == len(subset) and all(s.ok for s in scores)
        rows.append((label, len(subset), load, elapsed, cpu))

    table = Table(title=f"{len(prompts)} demo prompts ({args.lang}) x K={args.samples}, 20 new tokens; scorer on "
                        f"{args.device}; torch threads {torch.get_num_threads()}")
    for col in ("stage", "texts", "load s", "run s", "texts/s", "run time vs generation", "CPU s",
                "CPU time vs generation"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for label, n, load, elapsed, cpu in rows:
        table.add_row(label, str(n), f"{load:.1f}", f"{elapsed:.2f}", f"{n / elapsed:.1f}" if elapsed else "-",
                      f"{elapsed / gen_s:.3f}x", f"{cpu:.2f}", f"{cpu / gen_cpu:.3f}x")
    console = Console(width=140)
    console.print(table)
    for note in notes:
        console.print(note)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


if __name__ == "__main__":
    main()
