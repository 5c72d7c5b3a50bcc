"""Run a loaded sequence classifier over many texts, fast, one ``Score`` per text in input order.

What makes it fast compared with a plain ``transformers.pipeline`` (measured in
``benchmarks/bench_local_scoring.py``):

- the whole window of texts is tokenised in one call of the Rust tokenizer, not text by text;
- texts are sorted by token length and cut into batches under a text count and a padded-token budget,
  each padded only to its own longest text (``batching.plan_batches``);
- forward passes run under ``torch.inference_mode`` with nothing else per text in Python.

What makes it safe: a batch that raises is retried text by text, so only the text that really fails gets
an error (transient, never cached); a non-finite output is an error, never a number; truncation follows an
explicit policy (keep the head or the tail of a long text) and is counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import Score
from .batching import pad_batch, plan_batches
from .labels import LabelPlan

TRUNCATION_SIDES = {"head": "right", "tail": "left"}  # keep the head: cut on the right


@dataclass
class EngineStats:
    """Counters since the engine was built: texts scored, truncated, failed, forward passes run."""

    texts: int = 0
    truncated: int = 0
    failed: int = 0
    batches: int = 0
    padded_tokens: int = 0
    real_tokens: int = 0
    errors: list[str] = field(default_factory=list)


class SequenceClassifier:
    """A tokenizer + sequence-classification model + label plan, on one device."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        plan: LabelPlan,
        *,
        device: str,
        max_length: int,
        truncation: str = "head",
        batch_size: int = 64,
        max_batch_tokens: int | None = None,
    ) -> None:
        if truncation not in TRUNCATION_SIDES:
            raise ValueError(f"truncation must be head or tail, got {truncation!r}")
        if max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {max_length}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.plan = plan
        self.device = device
        self.max_length = max_length
        self.truncation = truncation
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.pad_id = pad_token_id(tokenizer, model.config)
        self.stats = EngineStats()
        # Off only to measure what sorting buys (benchmarks/bench_local_scoring.py): arrival-order batches.
        self.sort_by_length = True

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids of every text (special tokens included, truncated by the policy), and which were cut."""
        self.tokenizer.truncation_side = TRUNCATION_SIDES[self.truncation]
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length, add_special_tokens=True)
        ids = [list(x) for x in enc["input_ids"]]
        try:
            cut = [bool(e.overflowing) for e in enc.encodings]
        except (AttributeError, TypeError, ValueError):  # a slow (Python) tokenizer: count by length only
            cut = [len(x) >= self.max_length for x in ids]
        return ids, cut

    def tokenize_each(self, texts: Sequence[str]) -> tuple[list[list[int] | None], list[bool], list[str]]:
        """As ``tokenize``, but a text the tokenizer rejects (a lone surrogate from bad UTF-8 decoding...)
        gets ``None`` and its reason instead of failing the whole window."""
        try:
            ids, cut = self.tokenize(texts)
            return list(ids), cut, [""] * len(texts)
        except Exception:
            pass
        all_ids: list[list[int] | None] = []
        all_cut, reasons = [], []
        for text in texts:
            try:
                [one], [was_cut] = self.tokenize([text])
                all_ids.append(one)
                all_cut.append(was_cut)
                reasons.append("")
            except Exception as exc:
                all_ids.append(None)
                all_cut.append(False)
                reasons.append(f"BAD_TEXT: the tokenizer rejects this text ({type(exc).__name__}: {exc})"[:300])
        return all_ids, all_cut, reasons

    def predict(self, texts: Sequence[str]) -> list[Score]:
        """One score per text, in input order."""
        maybe_ids, cut, reasons = self.tokenize_each(texts)
        self.stats.texts += len(texts)
        self.stats.truncated += sum(cut)
        out: list[Score | None] = [None] * len(texts)
        good = [i for i, x in enumerate(maybe_ids) if x is not None]
        for i, reason in enumerate(reasons):
            if reason:
                out[i] = self._count_failure(Score.failed(reason))
        ids = [maybe_ids[i] or [] for i in good]
        for batch in self._plan([len(x) for x in ids]):
            for j, score in zip(batch, self._batch_or_each(batch, ids), strict=True):
                out[good[j]] = score
        return [s if s is not None else Score.failed("internal: unscored", transient=True) for s in out]

    def _plan(self, lengths: list[int]) -> list[list[int]]:
        if self.sort_by_length:
            return plan_batches(lengths, self.batch_size, self.max_batch_tokens)
        size, n = self.batch_size, len(lengths)
        return [list(range(i, min(i + size, n))) for i in range(0, n, size)]

    def _batch_or_each(self, batch: list[int], ids: list[list[int]]) -> list[Score]:
        """Score a batch; if it raises, score its texts one by one so only the failing ones get an error."""
        try:
            return self._forward([ids[i] for i in batch])
        except Exception as exc:
            if len(batch) == 1:
                return [self._failure(exc)]
        self._free_memory()
        scores = []
        for i in batch:
            try:
                scores.extend(self._forward([ids[i]]))
            except Exception as exc:
                scores.append(self._failure(exc))
        return scores

    def _forward(self, seqs: list[list[int]]) -> list[Score]:
        import torch

        input_ids, mask = pad_batch(seqs, self.pad_id, side="right")
        self.stats.batches += 1
        self.stats.padded_tokens += int(input_ids.numel())
        self.stats.real_tokens += int(mask.sum())
        with torch.inference_mode():
            logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
            probs = activate(logits.float(), self.plan.activation)[:, list(self.plan.indices)].cpu()
        rows = probs.tolist()
        finite = torch.isfinite(probs).all(dim=1).tolist()
        return [
            Score(values=dict(zip(self.plan.attributes, row, strict=True)))
            if ok
            else self._count_failure(Score.failed(f"NON_FINITE_SCORE: the model returned {row}"))
            for row, ok in zip(rows, finite, strict=True)
        ]

    def _failure(self, exc: Exception) -> Score:
        message = f"SCORER_ERROR: {type(exc).__name__}: {str(exc)[:500]}"
        return self._count_failure(Score.failed(message, transient=True))

    def _count_failure(self, score: Score) -> Score:
        self.stats.failed += 1
        if len(self.stats.errors) < 20 and score.error:
            self.stats.errors.append(score.error)
        return score

    def _free_memory(self) -> None:
        import torch

        if str(self.device).startswith("cuda"):
            torch.cuda.empty_cache()


def activate(logits: Any, activation: str) -> Any:
    """Logits -> probabilities: sigmoid per output, softmax across outputs, or the raw values."""
    import torch

    if activation == "sigmoid":
        return torch.sigmoid(logits)
    if activation == "softmax":
        return torch.softmax(logits, dim=-1)
    return logits


def pad_token_id(tokenizer: Any, config: Any) -> int:
    """The id to pad with: the tokenizer's pad token, else the config's, else EOS, else 0.

    Encoders need exactly the model's padding id (RoBERTa-family position ids are computed from it).
    """
    for candidate in (
        getattr(tokenizer, "pad_token_id", None),
        getattr(config, "pad_token_id", None),
        getattr(tokenizer, "eos_token_id", None),
    ):
        if isinstance(candidate, int):
            return candidate
    return 0


# Model types whose position ids start after the padding index (usable length = positions - pad - 1).
_OFFSET_POSITIONS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "data2vec-text", "longformer"})


def default_max_length(tokenizer: Any, config: Any, fallback: int = 512) -> int:
    """The longest input the checkpoint accepts: the tokenizer's limit and the position table's, smaller."""
    limits = []
    model_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(model_max, int) and 0 < model_max < 1_000_000:
        limits.append(model_max)
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
            positions -= int(getattr(config, "pad_token_id", 1) or 0) + 1
        limits.append(positions)
    return min(limits) if limits else fallback
