"""Local scoring throughput: the ``hf`` scorer vs a plain ``transformers.pipeline``, same model, same texts.

The model is a randomly initialised classifier of a real architecture and size (BERT-base by default:
12 layers, hidden 768, 110M parameters, Detoxify-original's shape; ``--arch xlmr`` for XLM-R-base,
Detoxify-multilingual's) with a WordPiece tokenizer trained here on the texts: weights cannot be
downloaded, and random weights cost exactly what trained ones do. Texts are real RTP prompts and
continuations from ../shared/data/rtp: ``rtp`` scores them one by one (RTP's short generations);
``mixed`` joins some into passages of up to 512 tokens (PTP-like generations).

Rows: the plain pipeline (``pipe(texts, truncation=True, top_k=None)``, batch size 1, float32: what
toxicity-eval scripts do), the pipeline asked to batch, the pipeline in bfloat16; then the ``hf`` scorer
with its defaults and ablations (float32, no length sorting, one text per batch, GPU-sized batches) to
show where the speed comes from. Each time is the best of ``--repeats`` runs, rows interleaved so a
shared machine's noise hits all alike; speedups are against the plain pipeline in the same run, and
the largest score difference from it is printed. Nothing here is a test.

Usage: python benchmarks/bench_local_scoring.py [--workload rtp|mixed|both] [--n 64] [--arch bert|xlmr]
       [--threads N] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from polytox.scoring.hf_classifier import HfClassifierScorer

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rtp"


def load_sentences() -> list[str]:
    """RTP prompt and continuation texts (the built-in demo prompts if ../shared is missing)."""
    out: list[str] = []
    for name in ("nontoxic.jsonl", "toxic.jsonl"):
        path = SHARED / name
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                out += [record["prompt"]["text"], record["continuation"]["text"]]
    if not out:
        from polytox.prompts import demo_path

        out = [
            json.loads(line)["text"] for line in Path(demo_path()).read_text(encoding="utf-8").splitlines()
        ]
    return [t for t in out if t.strip()]


def make_texts(sentences: list[str], n: int, workload: str, seed: int = 0) -> list[str]:
    """``n`` texts. ``rtp``: single RTP prompts / continuations (RTP's 20-token generations).
    ``mixed``: 50% one sentence, 30% 2-6 joined, 20% 10-40 joined (PTP-like generations up to 512 tokens)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        r = rng.random()
        k = 1 if workload == "rtp" or r < 0.5 else rng.randint(2, 6) if r < 0.8 else rng.randint(10, 40)
        start = rng.randrange(len(sentences))
        texts.append(" ".join(sentences[(start + j) % len(sentences)] for j in range(k)))
    return texts


def build_model(arch: str, sentences: list[str], folder: Path) -> Path:
    """A random BERT-base / XLM-R-base binary classifier and a WordPiece tokenizer trained on the texts."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        PreTrainedTokenizerFast,
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
    )

    bert = arch == "bert"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if bert else ["<s>", "<pad>", "</s>", "<unk>"]
    pad, unk, cls, sep = (
        (specials[0], specials[1], specials[2], specials[3])
        if bert
        else (specials[1], specials[3], specials[0], specials[2])
    )
    tok = Tokenizer(models.WordPiece(unk_token=unk))
    tok.normalizer = normalizers.BertNormalizer(lowercase=bert)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(sentences, trainers.WordPieceTrainer(vocab_size=30_522, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", special_tokens=[(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=pad, unk_token=unk, cls_token=cls, sep_token=sep, model_max_length=512
    )
    labels = {"id2label": {0: "neutral", 1: "toxic"}, "label2id": {"neutral": 0, "toxic": 1}}
    torch.manual_seed(0)
    if bert:  # bert-base-uncased's shape (Detoxify original)
        model: Any = BertForSequenceClassification(BertConfig(vocab_size=30_522, **labels))
    else:  # xlm-roberta-base's shape (Detoxify multilingual), vocabulary cut to the trained tokenizer's
        model = XLMRobertaForSequenceClassification(
            XLMRobertaConfig(
                vocab_size=max(len(tokenizer), 32_000),
                max_position_embeddings=514,
                pad_token_id=1,
                bos_token_id=0,
                eos_token_id=2,
                type_vocab_size=1,
                **labels,
            )
        )
    path = folder / arch
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def timed(fn: Callable[[], list[float]]) -> tuple[float, list[float]]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def bench(workload: str, n: int, path: Path, sentences: list[str], repeats: int, arch: str) -> Table:
    """One table: every method over the same ``n`` texts of ``workload``."""
    from transformers import AutoTokenizer, pipeline

    texts = make_texts(sentences, n, workload)
    langs = ["en"] * len(texts)
    tokenizer = AutoTokenizer.from_pretrained(path)
    lengths = [len(x) for x in tokenizer(texts, truncation=True, max_length=512)["input_ids"]]

    def run_pipeline(batch_size: int | None = None, dtype: Any = torch.float32) -> Callable[[], list[float]]:
        pipe = pipeline(
            "text-classification", model=str(path), tokenizer=tokenizer, device="cpu", dtype=dtype
        )
        kwargs = {} if batch_size is None else {"batch_size": batch_size}

        def go() -> list[float]:
            out = pipe(texts, truncation=True, max_length=512, top_k=None, **kwargs)
            return [next(d["score"] for d in row if d["label"] == "toxic") for row in out]

        pipe(texts[:2], truncation=True, top_k=None)  # warm-up
        return go

    engines: dict[int, Any] = {}

    def run_ours(sort: bool = True, **opts: str) -> Callable[[], list[float]]:
        scorer = HfClassifierScorer(model=str(path), device="cpu", **opts)
        scorer.engine.sort_by_length = sort
        engines[len(engines) + 3] = scorer.engine  # row index, for the padding column

        def go() -> list[float]:
            return [s.values["toxicity"] if s.values else float("nan") for s in scorer.score(texts, langs)]

        scorer.score(texts[:2], langs[:2])  # warm-up
        scorer.engine.stats.padded_tokens = scorer.engine.stats.real_tokens = 0
        return go

    from polytox._util.torch_device import dtype_name, pick_dtype

    auto = dtype_name(pick_dtype("auto", "cpu"))
    rows: list[tuple[str, Callable[[], list[float]]]] = [
        ("pipeline, plain (batch_size=1, float32)", run_pipeline()),
        ("pipeline, batch_size=16, float32", run_pipeline(16)),
        ("pipeline, plain, bfloat16", run_pipeline(dtype=torch.bfloat16)),
        (f"polytox hf, defaults (sorted, 16 texts / 4096 tokens, {auto})", run_ours()),
        ("polytox hf, float32", run_ours(dtype="float32")),
        ("polytox hf, float32, arrival order (no sorting)", run_ours(sort=False, dtype="float32")),
        ("polytox hf, float32, one text per batch", run_ours(dtype="float32", batch_size="1")),
        (
            "polytox hf, bfloat16, 64 texts / 16384 tokens",
            run_ours(dtype="bfloat16", batch_size="64", max_batch_tokens="16384"),
        ),
    ]
    best: dict[str, float] = {}
    outputs: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in rows:
            seconds, out = timed(fn)
            best[name] = min(best.get(name, float("inf")), seconds)
            outputs[name] = out
    reference, base = outputs[rows[0][0]], best[rows[0][0]]
    lengths.sort()
    table = Table(
        title=f"{workload}: {n} texts, random {arch}-base-sized classifier, "
        f"{torch.get_num_threads()} CPU thread(s)",
        caption=f"tokens per text: median {lengths[len(lengths) // 2]}, "
        f"mean {sum(lengths) / len(lengths):.0f}, "
        f"max {lengths[-1]}; best of {repeats} interleaved runs; speedup vs the plain pipeline; "
        "padding: padded tokens beyond the real ones",
    )
    for col in ("method", "seconds", "texts/s", "speedup", "padding", "max |diff| vs plain"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for row, (name, _) in enumerate(rows):
        diff = max(abs(a - b) for a, b in zip(outputs[name], reference, strict=True))
        stats = engines[row].stats if row in engines else None
        padding = f"{stats.padded_tokens / stats.real_tokens - 1:.0%}" if stats and stats.real_tokens else "-"
        table.add_row(
            name,
            f"{best[name]:.2f}",
            f"{n / best[name]:.1f}",
            f"{base / best[name]:.2f}x",
            padding,
            f"{diff:.1e}",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["rtp", "mixed", "both"], default="both")
    parser.add_argument("--n", type=int, default=64, help="texts per workload")
    parser.add_argument("--arch", choices=["bert", "xlmr"], default="bert")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    sentences = load_sentences()
    console = Console(width=150)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_model(args.arch, sentences, Path(tmp))
        for workload in ["rtp", "mixed"] if args.workload == "both" else [args.workload]:
            n = args.n
            console.print(bench(workload, n, path, sentences, args.repeats, args.arch))


if __name__ == "__main__":
    main()
