"""Fluency: perplexity of each continuation given its prompt under a scorer LM (``--fluency-model``).

DExperts reports the mean perplexity of generations under a larger LM (GPT-2 XL), conditioned on the
prompt. polytox does the same for any causal LM: the prompt's raw text (no chat template) is the context,
only the continuation's tokens are scored. Results are written per shard into
``RUN/fluency/<model>/part-*.parquet`` (atomic; a rerun skips finished shards). A failed generation or an
empty continuation gets an error row, never a perplexity.

``--fluency-samples N`` scores only the continuations with ``sample_index < N`` of every prompt (a fixed
subsample, the same in every run with the same seeds, so runs stay paired) into
``RUN/fluency/<model>/first<N>/``: a directory per N, so parts of different subsamples never mix.
Continuations outside the subsample get no row at all (they are not failures).

``heldout_perplexity`` is RTP Table 10's check: a (detoxified) model's own perplexity on held-out text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import require
from ..store.files import slug, write_parquet
from ..store.reader import RunReader

SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("sample_index", pa.int32()),
        ("nll_sum", pa.float64()),
        ("n_tokens", pa.int32()),
        ("ppl", pa.float64()),
        ("error", pa.string()),
    ]
)


class PerplexityScorer:
    """Token-level negative log-likelihood of continuations under a causal LM."""

    def __init__(self, model: str, device: str = "auto", batch_size: int = 16) -> None:
        from .._util.torch_device import pick_device
        from ..models import resolve_model

        transformers = require("transformers", "hf")
        self.torch = require("torch", "hf")
        path, _ = resolve_model(model)
        self.name = model
        self.device = pick_device(device)
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype="float32").to(self.device).eval()
        config = self.model.config
        self.context = int(getattr(config, "max_position_embeddings", 0) or 1024)
        self.batch_size = batch_size
        pad = self.tok.pad_token_id
        self.pad_id = pad if pad is not None else (self.tok.eos_token_id or 0)

    def nll(
        self, contexts: Sequence[str], continuations: Sequence[str], prefix: Sequence[int] = ()
    ) -> list[tuple[float, int]]:
        """(sum of NLL in nats, number of scored tokens) per continuation; 0 tokens for an empty one."""
        torch = self.torch
        pairs = []
        for ctx, cont in zip(contexts, continuations, strict=True):
            c_ids = list(prefix) + (self.tok(ctx, add_special_tokens=True)["input_ids"] if ctx else [])
            if not c_ids and self.tok.bos_token_id is not None:
                c_ids = [self.tok.bos_token_id]
            x_ids = self.tok(cont, add_special_tokens=False)["input_ids"][: self.context - 1]
            c_ids = c_ids[-(self.context - len(x_ids)) :] if c_ids else c_ids
            pairs.append((c_ids, x_ids))
        out: list[tuple[float, int]] = []
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start : start + self.batch_size]
            width = max(len(c) + len(x) for c, x in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            target = torch.full((len(batch), width), -100, dtype=torch.long)
            for i, (c, x) in enumerate(batch):
                seq = c + x
                ids[i, : len(seq)] = torch.tensor(seq)
                mask[i, : len(seq)] = 1
                if x:
                    target[i, len(c) : len(seq)] = torch.tensor(x, dtype=torch.long)
            # logits only from the first position that predicts a continuation token onwards
            first = max(0, min(len(c) for c, _ in batch) - 1)
            with torch.inference_mode():
                logits = self.model(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device), logits_to_keep=width - first
                ).logits
                tgt = target[:, 1 + first :].to(self.device)
                keep = tgt >= 0  # score only continuation positions (a big vocabulary makes the rest costly)
                nll = torch.nn.functional.cross_entropy(logits[:, :-1][keep].float(), tgt[keep], reduction="none")
            row_of = keep.nonzero()[:, 0]
            sums = torch.zeros(len(batch), dtype=torch.float64).index_add_(0, row_of.cpu(), nll.double().cpu())
            counts = keep.sum(dim=1).cpu()
            for i in range(len(batch)):  # a first token with no context at all cannot be scored
                out.append((float(sums[i]), int(counts[i])))
        return out

    def close(self) -> None:
        self.model = None


def fluency_dir(store: RunReader, model: str, samples: int = 0) -> Path:
    """Where the perplexity parts of ``model`` are stored; a subsample (``samples`` > 0) has its own folder."""
    if samples < 0:
        raise ValueError(f"samples must be >= 0, got {samples}")
    root = store.path / "fluency" / slug(model)
    return root / f"first{samples}" if samples else root


def score_fluency(store: RunReader, n_shards: int, model: str, prompt_texts: dict[str, str], samples: int = 0) -> None:
    """Write the perplexity part of every shard that has generations and no fluency part yet; with
    ``samples`` > 0 only the continuations with ``sample_index < samples`` are scored (and stored)."""
    out = fluency_dir(store, model, samples)
    todo = [i for i in range(n_shards) if store.has_generations(i) and not (out / f"part-{i:05d}.parquet").exists()]
    if not todo:
        return
    scorer = PerplexityScorer(model)
    try:
        for shard in todo:
            gens = [g for g in store.read_generations(shard) if not samples or g.sample_index < samples]
            ok = [g for g in gens if g.text]
            nll = scorer.nll([prompt_texts.get(g.prompt_id, "") for g in ok], [g.text or "" for g in ok])
            by_key = {(g.prompt_id, g.sample_index): v for g, v in zip(ok, nll, strict=True)}
            rows: dict[str, list[Any]] = {k: [] for k in SCHEMA.names}
            for g in gens:
                value = by_key.get((g.prompt_id, g.sample_index))
                error = None
                if g.text is None:
                    error = "GENERATION_FAILED: no text to score"
                elif value is None or value[1] == 0:
                    error = "EMPTY_CONTINUATION: no tokens to score"
                rows["prompt_id"].append(g.prompt_id)
                rows["sample_index"].append(g.sample_index)
                rows["nll_sum"].append(value[0] if value and not error else None)
                rows["n_tokens"].append(value[1] if value and not error else None)
                rows["ppl"].append(math.exp(value[0] / value[1]) if value and not error else None)
                rows["error"].append(error)
            write_parquet(out / f"part-{shard:05d}.parquet", pa.Table.from_pydict(rows, schema=SCHEMA))
    finally:
        scorer.close()


def fluency_summary(store: RunReader, model: str, samples: int = 0) -> dict[str, Any]:
    """Mean / median per-continuation perplexity and the corpus-level perplexity of a run (of its first
    ``samples`` continuations per prompt when > 0: ``samples_per_prompt``, None = all)."""
    import numpy as np

    parts = sorted(fluency_dir(store, model, samples).glob("part-*.parquet"))
    per_prompt = samples or None
    if not parts:
        return {"model": model, "samples_per_prompt": per_prompt, "mean_ppl": None, "n_scored": 0, "n_missing": 0}
    table = pa.concat_tables([pq.read_table(p) for p in parts])
    ppl = np.array([v for v in table.column("ppl").to_pylist() if v is not None], dtype=np.float64)
    nll = sum(v for v in table.column("nll_sum").to_pylist() if v is not None)
    ntok = sum(v for v in table.column("n_tokens").to_pylist() if v is not None)
    return {
        "model": model,
        "samples_per_prompt": per_prompt,
        "mean_ppl": float(ppl.mean()) if len(ppl) else None,
        "median_ppl": float(np.median(ppl)) if len(ppl) else None,
        "corpus_ppl": math.exp(nll / ntok) if ntok else None,
        "n_scored": len(ppl),
        "n_missing": int(table.num_rows - len(ppl)),
        "n_tokens": int(ntok),
    }


def heldout_perplexity(
    model: str, texts: Sequence[str], prefix_token: str | None = None, batch_size: int = 8
) -> dict[str, Any]:
    """RTP Table 10: corpus perplexity of ``model`` on ``texts`` (with ATCON's token prepended if given)."""
    scorer = PerplexityScorer(model, batch_size=batch_size)
    prefix: list[int] = []
    if prefix_token is not None:
        prefix = [int(scorer.tok.convert_tokens_to_ids(prefix_token))]
    bos = [scorer.tok.bos_token_id] if scorer.tok.bos_token_id is not None else []
    try:
        # each text scored from its start: the context is only BOS (and the attribute token)
        nll = scorer.nll([""] * len(texts), list(texts), prefix=prefix + bos if (prefix or bos) else ())
    finally:
        scorer.close()
    total = sum(v for v, _ in nll)
    ntok = sum(n for _, n in nll)
    return {
        "model": model,
        "ppl": math.exp(total / ntok) if ntok else None,
        "n_texts": len(texts),
        "n_tokens": ntok,
        "attribute_token": prefix_token,
    }
