"""Batch-invariant sampling on the logits' device: each row draws from its own pre-generated uniforms.

``torch.multinomial`` over a batch consumes one shared RNG stream, so a sample depends on which other
rows share its batch. polytox instead gives every (prompt, sample) its own uniform numbers, derived from
its seed, and samples by inverting the row's (temperature / top-k / top-p filtered) CDF. A resumed or
re-batched run therefore draws what an uninterrupted one would, and a row never depends on RNG state
consumed by its neighbours.

Sampling runs where the logits are (no copy of the full logits to the host). The order of the CDF is
probability descending, ties by token id ascending (a stable sort), so a draw is one well-defined token.

Two exact ways find a top-p nucleus (``method``):

- ``sort``: sort the whole vocabulary per row (the reference). No host synchronisation, but on a 128K
  vocabulary the sort and its cumulative sum are a sizeable share of a small model's decode step.
- ``candidates``: ``topk`` to the ``NUCLEUS_CANDIDATES`` (+1) most likely tokens. A row whose nucleus
  ends among them (its kept mass reaches ``top_p`` before the candidate set's last, possibly tied, value)
  draws exactly the token the sort draws; the other rows fall back to the sort.

Which rows fall back is data-dependent. Two exact ways decide it (``fallback``):

- ``host``: read on the host whether any row falls back and sort those rows (free on the CPU; on a GPU,
  one synchronisation per step, which stops the host from queueing the next step ahead);
- ``device``: sort, every step, the ``fallback_budget(rows)`` rows that need it most (rows that fall back
  first; ``FALLBACK_ROWS_SHARE`` of the batch), chosen and merged on the device with static shapes and no
  host read, so the step can be queued ahead or captured. Rows beyond the budget would be inexact, so an
  ``overflow`` flag on the device records it; the decoder reads that flag at its periodic EOS read-back
  and, when set, decodes the call again with the ``host`` fallback (``continuous.decode``): the tokens
  are always the sort's.

``auto`` takes ``candidates`` on the CPU and on CUDA (much faster than the sort on peaked logits, a little
slower on flat ones; docs/decoding.md, "Sampling without a full sort"), and ``sort`` elsewhere.
Top-k alone and top-p = 1 never sort the vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

# Tokens examined before a nucleus (top-p) falls back to a full sort; exact either way, the bound only
# decides which rows avoid the sort.
NUCLEUS_CANDIDATES = 1024
METHODS = ("auto", "sort", "candidates")
FALLBACKS = ("auto", "host", "device")
# Rows the ``device`` fallback sorts every step, as a share of the batch (at least one row): its fixed cost
# (a sort of this many rows) against the host read it removes; more rows falling back in one step overflow.
FALLBACK_ROWS_SHARE = 1 / 16


def row_uniforms(seeds: Sequence[int], steps: int) -> np.ndarray:
    """``[len(seeds), steps]`` float64 uniforms in [0, 1), one independent stream per seed."""
    out = np.empty((len(seeds), steps), dtype=np.float64)
    for i, seed in enumerate(seeds):
        out[i] = np.random.default_rng(seed).random(steps)
    return out


def resolve_method(method: str, device_type: str) -> str:
    """``sort`` or ``candidates`` for ``method`` (one of ``METHODS``) on a device of ``device_type``."""
    if method not in METHODS:
        raise ValueError(f"sampler={method}: expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "candidates" if device_type in ("cpu", "cuda") else "sort"
    return method


def resolve_fallback(fallback: str, device_type: str) -> str:
    """``host`` or ``device`` for ``fallback`` (one of ``FALLBACKS``): ``auto`` is ``host`` on the CPU only."""
    if fallback not in FALLBACKS:
        raise ValueError(f"sampler_fallback={fallback}: expected one of {', '.join(FALLBACKS)}")
    if fallback == "auto":
        return "host" if device_type == "cpu" else "device"
    return fallback


def fallback_budget(rows: int) -> int:
    """Rows of a ``rows``-row batch the ``device`` fallback sorts every step (``FALLBACK_ROWS_SHARE``)."""
    return max(1, math.ceil(rows * FALLBACK_ROWS_SHARE))


def _invert(probs: Any, u: Any) -> Any:
    """Index of the first position whose cumulative mass exceeds ``u * total`` in each row.

    Clamped to the first position where the cumulative mass reaches the total (the last one that adds
    mass): a uniform that rounds to 1.0 in float32 takes the last kept token, never a filtered-out one.
    One more binary search per row, no pass over the vocabulary.
    """
    import torch

    cdf = torch.cumsum(probs, dim=-1)
    total = cdf[:, -1:].contiguous()
    idx = torch.searchsorted(cdf, u.unsqueeze(1) * total, right=True).squeeze(1)
    last = torch.searchsorted(cdf, total, right=False).squeeze(1)
    return torch.minimum(idx, last)


def _nucleus_pick(sorted_probs: Any, u: Any, top_p: float) -> Any:
    """Position in descending-sorted probabilities chosen by ``u`` inside the top-p nucleus."""
    import torch

    if top_p < 1.0:
        above = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = torch.where(above < top_p, sorted_probs, torch.zeros_like(sorted_probs))
    return _invert(sorted_probs, u)


def sort_pick(probs: Any, u: Any, top_p: float) -> Any:
    """Nucleus draw over the whole vocabulary, sorted (stable: ties by token id), per row of ``probs``."""
    import torch

    sorted_vals, sorted_idx = torch.sort(probs, dim=-1, descending=True, stable=True)
    return sorted_idx.gather(1, _nucleus_pick(sorted_vals, u, top_p).unsqueeze(1)).squeeze(1)


def _tie_order(vals: Any, idx: Any) -> tuple[Any, Any]:
    """Reorder ``topk`` output so equal probabilities are by token id ascending, as the stable sort has them."""
    import torch

    # Probabilities are >= 0, so their float32 bits order like the values; one int64 key sorts both ways.
    key = (vals.view(torch.int32).to(torch.int64) << 32) - idx
    order = torch.argsort(key, dim=-1, descending=True)
    return vals.gather(1, order), idx.gather(1, order)


def candidate_set(probs: Any, top_p: float, candidates: int) -> tuple[Any, Any, Any]:
    """The top ``candidates + 1`` probabilities and token ids per row (sort order) and which rows they cover.

    A row is covered when the mass kept before its first position whose value equals the last candidate's
    (the first position where a tie may hold other tokens than the sort's) already reaches ``top_p``:
    the nucleus then ends among tokens certain to be the sort's, in the sort's order, with the same
    cumulative sums (same values in the same positions), so the draw is the sort's.
    """
    import torch

    vals, idx = _tie_order(*torch.topk(probs, candidates + 1, dim=-1))
    strict = (vals[:, :candidates] > vals[:, candidates:]).sum(dim=-1)  # positions surely the sort's
    above = torch.cumsum(vals, dim=-1) - vals
    covered = above.gather(1, strict.unsqueeze(1)).squeeze(1) >= top_p
    return vals, idx, covered


def candidate_pick(probs: Any, u: Any, top_p: float, candidates: int | None = None, overflow: Any = None) -> Any:
    """The same draw as ``sort_pick`` from the top ``candidates`` tokens, sorting only rows they do not cover.

    ``overflow`` None: the rows to sort are found on the host (one read). Otherwise (a boolean device
    tensor, updated in place) the ``device`` fallback: ``fallback_budget`` rows sorted with no host read,
    and ``overflow`` set when more rows than that fell back (their tokens are then not the sort's).
    """
    k = min(NUCLEUS_CANDIDATES if candidates is None else candidates, probs.shape[-1] - 1)
    if k < 1:
        return sort_pick(probs, u, top_p)
    vals, idx, covered = candidate_set(probs, top_p, k)
    picks = idx.gather(1, _nucleus_pick(vals, u, top_p).unsqueeze(1)).squeeze(1)
    if overflow is not None:
        return _device_fallback(picks, covered, probs, u, top_p, overflow)
    if not bool(covered.all()):  # the one data-dependent branch (a host read on a GPU)
        rows = (~covered).nonzero().squeeze(1)
        picks[rows] = sort_pick(probs[rows], u[rows], top_p)
    return picks


def _device_fallback(picks: Any, covered: Any, probs: Any, u: Any, top_p: float, overflow: Any) -> Any:
    """``picks`` with the uncovered rows' sorted draws, at most ``fallback_budget`` of them; static shapes."""
    import torch

    rows = picks.shape[0]
    budget = fallback_budget(rows)
    need = ~covered
    if budget >= rows:
        return torch.where(covered, picks, sort_pick(probs, u, top_p))
    order = torch.argsort(need.to(torch.int32), descending=True, stable=True)[:budget]  # rows falling back first
    fixed = torch.where(need[order], sort_pick(probs[order], u[order], top_p), picks[order])
    overflow |= need.sum() > budget
    return picks.scatter(0, order, fixed)


def sample_next(
    logits: Any,
    u: Any,
    temperature: float,
    top_p: float,
    top_k: int,
    method: str = "auto",
    candidates: int | None = None,
    overflow: Any = None,
) -> Any:
    """Next token per row from ``logits [R, V]`` and uniforms ``u [R]`` (float32 tensors, same device).

    Greedy when ``temperature == 0``. Otherwise softmax(logits / T), restricted to the ``top_k`` most
    likely tokens (0 = all), then to the smallest set whose mass reaches ``top_p`` (nucleus; a token is
    kept while the mass ranked above it is below ``top_p``), renormalised, and inverted at ``u``.
    ``method`` (``METHODS``) chooses how a nucleus is found; every method draws the same token.
    ``overflow``: see ``candidate_pick`` (the ``device`` fallback; None: ``host``).
    """
    import torch

    if temperature == 0:
        return logits.argmax(dim=-1)
    vocab = logits.shape[-1]
    if top_k and top_k < vocab:
        vals, idx = torch.topk(logits.float() / temperature, top_k, dim=-1)
        probs = torch.softmax(vals, dim=-1)
        return idx.gather(1, _nucleus_pick(probs, u, top_p).unsqueeze(1)).squeeze(1)
    # At T = 1 the softmax reads the model's (e.g. bfloat16) logits and computes in float32 itself: no float32
    # copy of the full-vocabulary logits, the same probabilities (tests/test_sampling.py).
    scaled = logits if temperature == 1.0 else logits.float() / temperature
    probs = torch.softmax(scaled, dim=-1, dtype=torch.float32)
    if top_p >= 1.0:
        return _invert(probs, u)
    if resolve_method(method, probs.device.type) == "sort":
        return sort_pick(probs, u, top_p)
    return candidate_pick(probs, u, top_p, candidates, overflow)
