"""Length-sorted batches with dynamic padding: the main reason local scoring is fast.

Texts from a language model vary from a few tokens to hundreds. Batching them in arrival order pads
every batch to its longest member, so most of the compute goes to padding; one text at a time (what a
plain ``transformers.pipeline`` does by default) pays the per-call overhead on every text. Sorting by
token length first makes each batch nearly uniform, and a token budget lets batches of short texts be
large and batches of long texts small, so memory use stays flat. Results are put back in input order
by the caller using the indices each batch carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# A text joins a batch only if it is at least 75% as long as the batch's longest (or within 8 tokens).
MAX_PADDING = 0.25
PADDING_SLACK = 8


def plan_batches(
    lengths: Sequence[int],
    max_batch_size: int,
    max_batch_tokens: int | None = None,
    max_padding: float | None = MAX_PADDING,
) -> list[list[int]]:
    """Indices of the texts, grouped into batches, longest texts first.

    A batch holds at most ``max_batch_size`` texts and, when ``max_batch_tokens`` is set, at most that many
    padded tokens (texts x its longest text); a single text longer than the budget still gets a batch of
    its own. With ``max_padding`` set, a text joins a batch only if padding it costs at most that share
    of the batch's width (or at most ``PADDING_SLACK`` tokens): among thousands of sorted texts the
    neighbours are nearly equal anyway, but in a small or very spread window this keeps a 40-token text
    out of a batch padded to 500. Longest first, so a batch too large for memory fails at the start, not
    an hour in.
    """
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        width = max(longest, lengths[i])
        over_tokens = max_batch_tokens is not None and current and width * (len(current) + 1) > max_batch_tokens
        too_short = max_padding is not None and width - lengths[i] > max(PADDING_SLACK, max_padding * width)
        if current and (len(current) >= max_batch_size or over_tokens or too_short):
            batches.append(current)
            current, width = [], lengths[i]
        current.append(i)
        longest = width
    if current:
        batches.append(current)
    return batches


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int, side: str = "right") -> tuple[Any, Any]:
    """``(input_ids, attention_mask)`` tensors for token-id lists, padded to the batch's longest.

    ``side='left'`` for decoder models whose next-token logits are read at the last position.
    """
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        n = len(seq)
        if n == 0:
            continue
        if side == "left":
            ids[row, width - n :] = torch.as_tensor(seq, dtype=torch.long)
            mask[row, width - n :] = 1
        else:
            ids[row, :n] = torch.as_tensor(seq, dtype=torch.long)
            mask[row, :n] = 1
    return ids, mask
