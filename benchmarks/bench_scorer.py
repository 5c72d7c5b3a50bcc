"""Is scoring the bottleneck of ``make demo``? Generation vs scoring time on the same texts, one run.

Generates K continuations of built-in demo prompts (all 17 languages, round-robin) with the default
embedded SmolLM2 (RTP settings: 20 new tokens, top_p 0.9), then scores exactly those continuations with

- ``svm`` (the English SVM, the previous default; English rows only),
- ``polytox-ml mode=ngram`` (head without backbone),
- ``polytox-ml`` (full: n-grams + gemma-3-270m hidden states; the default for PTP's 17 languages),
- ``default`` (what ``polytox eval`` uses: polytox-ml routed by language).

Scorers run with the score cache off; model loading is timed apart from scoring.
Usage: python benchmarks/bench_scorer.py [--prompts 34] [--samples 5] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from rich.console import Console
from rich.table import Table

from polytox.generation.hf import TransformersGenerator
from polytox.prompts import demo_path
from polytox.scoring import build_scorer
from polytox.spec import GenerationSpec
from polytox.types import GenerationRequest, Prompt, derive_seed


def demo_prompts(n: int) -> list[Prompt]:
    """``n`` demo prompts taking each language in turn, so every language is represented."""
    by_lang: dict[str, list[Prompt]] = {}
    with open(demo_path(), encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            by_lang.setdefault(rec["lang"], []).append(Prompt(id=rec["id"], text=rec["text"], lang=rec["lang"]))
    out: list[Prompt] = []
    depth = 0
    while len(out) < n and any(depth < len(v) for v in by_lang.values()):
        for prompts in by_lang.values():
            if depth < len(prompts) and len(out) < n:
                out.append(prompts[depth])
        depth += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=34)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = demo_prompts(args.prompts)
    spec = GenerationSpec(samples=args.samples, max_new_tokens=20, top_p=0.9, temperature=1.0)
    started = time.perf_counter()
    generator = TransformersGenerator(spec)
    load_gen = time.perf_counter() - started
    requests = [GenerationRequest(p, k, derive_seed(0, p.id, k)) for p in prompts for k in range(args.samples)]
    started = time.perf_counter()
    generations = generator.generate(requests)
    gen_s = time.perf_counter() - started
    generator.close()
    langs = {p.id: p.lang for p in prompts}
    texts = [g.text or "" for g in generations]
    text_langs = [langs[g.prompt_id] for g in generations]

    rows: list[tuple[str, int, float, float]] = [("generate (SmolLM2-135M)", len(texts), load_gen, gen_s)]
    for label, name, options in [("svm (English rows)", "svm", {}), ("polytox-ml mode=ngram", "polytox-ml",
                                  {"mode": "ngram"}), ("polytox-ml (full)", "polytox-ml", {}),
                                 ("default (eval's scorer)", "default", {})]:
        started = time.perf_counter()
        scorer = build_scorer(name, {**options, "cache": "off"})
        subset = [(t, lang) for t, lang in zip(texts, text_langs, strict=True) if scorer.supports(lang)]
        # The first call loads the backbone (converted once into the cache); warm it up outside the timing.
        scorer.score([subset[0][0]], [subset[0][1]])
        load = time.perf_counter() - started
        started = time.perf_counter()
        scores = scorer.score([t for t, _ in subset], [lang for _, lang in subset])
        elapsed = time.perf_counter() - started
        scorer.close()
        assert len(scores) == len(subset)
        rows.append((label, len(subset), load, elapsed))

    table = Table(title=f"{len(prompts)} demo prompts x K={args.samples}, 20 new tokens; torch threads "
                        f"{torch.get_num_threads()}")
    for col in ("stage", "texts", "load s", "run s", "texts/s", "run time vs generation"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for label, n, load, elapsed in rows:
        table.add_row(label, str(n), f"{load:.1f}", f"{elapsed:.1f}", f"{n / elapsed:.1f}" if elapsed else "-",
                      f"{elapsed / gen_s:.2f}x")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
