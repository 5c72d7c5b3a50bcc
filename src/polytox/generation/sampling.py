"""Batch-invariant sampling on the logits' device: each row draws from its own pre-generated uniforms.

``torch.multinomial`` over a batch consumes one shared RNG stream, so a sample depends on which other
rows share its batch. polytox instead gives every (prompt, sample) its own uniform numbers, derived from
its seed, and samples by inverting the row's (temperature / top-k / top-p filtered) CDF. A resumed or
re-batched run therefore draws what an uninterrupted one would, and a row never depends on RNG state
consumed by its neighbours.

Sampling runs where the logits are (no copy of the full logits to the host). On the CPU a nucleus is
found from the top ``NUCLEUS_PROBE`` tokens when they cover it (saving a full-vocabulary sort); on a GPU
the full sort is cheap and the probe's data-dependent branch would force a host synchronisation, so the
vocabulary is sorted outright. Both are exact, so they choose the same token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# How many top tokens to examine before falling back to a full sort for a nucleus (top-p) that is
# wider than this; exact either way, the bound only saves the full-vocabulary sort in common cases.
NUCLEUS_PROBE = 1024


def row_uniforms(seeds: Sequence[int], steps: int) -> np.ndarray:
    """``[len(seeds), steps]`` float64 uniforms in [0, 1), one independent stream per seed."""
    out = np.empty((len(seeds), steps), dtype=np.float64)
    for i, seed in enumerate(seeds):
        out[i] = np.random.default_rng(seed).random(steps)
    return out


def _invert(probs: Any, u: Any) -> Any:
    """Index of the first position whose cumulative mass exceeds ``u * total`` in each row."""
    import torch

    cdf = torch.cumsum(probs, dim=-1)
    target = (u * cdf[:, -1]).unsqueeze(1)
    idx = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return idx.clamp_(max=probs.shape[-1] - 1)


def sample_next(logits: Any, u: Any, temperature: float, top_p: float, top_k: int,
                probe: bool | None = None) -> Any:
    """Next token per row from ``logits [R, V]`` and uniforms ``u [R]`` (float32 tensors, same device).

    Greedy when ``temperature == 0``. Otherwise softmax(logits / T), restricted to the ``top_k`` most
    likely tokens (0 = all), then to the smallest set whose mass reaches ``top_p`` (nucleus; a token is
    kept while the mass ranked above it is below ``top_p``), renormalised, and inverted at ``u``.
    ``probe`` (default: on CPU only) tries the top ``NUCLEUS_PROBE`` tokens before a full sort.
    """
    import torch

    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.float() / temperature
    vocab = scaled.shape[-1]
    if top_k and top_k < vocab:
        vals, idx = torch.topk(scaled, top_k, dim=-1)
        probs = torch.softmax(vals, dim=-1)
        return idx.gather(1, _nucleus_pick(probs, u, top_p).unsqueeze(1)).squeeze(1)
    probs = torch.softmax(scaled, dim=-1)
    if top_p >= 1.0:
        return _invert(probs, u)
    if probe is None:
        probe = probs.device.type == "cpu"
    if not probe:
        sorted_vals, sorted_idx = torch.sort(probs, dim=-1, descending=True)
        local = _nucleus_pick(sorted_vals, u, top_p)
        return sorted_idx.gather(1, local.unsqueeze(1)).squeeze(1)
    k = min(NUCLEUS_PROBE, vocab)
    top_vals, top_idx = torch.topk(probs, k, dim=-1)  # sorted descending
    covered = top_vals.sum(dim=-1) >= top_p
    picks = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
    if bool(covered.any()):
        rows = covered.nonzero().squeeze(1)
        local = _nucleus_pick(top_vals[rows], u[rows], top_p)
        picks[rows] = top_idx[rows].gather(1, local.unsqueeze(1)).squeeze(1)
    if not bool(covered.all()):
        rows = (~covered).nonzero().squeeze(1)
        sorted_vals, sorted_idx = torch.sort(probs[rows], dim=-1, descending=True)
        local = _nucleus_pick(sorted_vals, u[rows], top_p)
        picks[rows] = sorted_idx.gather(1, local.unsqueeze(1)).squeeze(1)
    return picks


def _nucleus_pick(sorted_probs: Any, u: Any, top_p: float) -> Any:
    """Position in descending-sorted probabilities chosen by ``u`` inside the top-p nucleus."""
    import torch

    if top_p < 1.0:
        above = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = torch.where(above < top_p, sorted_probs, torch.zeros_like(sorted_probs))
    return _invert(sorted_probs, u)
