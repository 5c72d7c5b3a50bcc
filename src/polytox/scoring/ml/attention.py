"""Attention pooling over the backbone's token states: a ridge on the mean pool that learns where to look.

A mean pool weighs every token alike, yet a toxic text is often toxic in two words. The attention probe
gives token ``t`` of a text the weight ``softmax_t(v . x_t)`` and scores the text as
``sum_t weight_t * (w . x_t) + b``, where ``x_t`` is the token's states in the head's layers side by side,
standardised with the mean pool's statistics. With ``v = 0`` every weight is ``1 / tokens`` and the probe
is exactly the ridge on the standardised mean pool. So the fit starts from that ridge's ``w`` and moves
``v``, ``w`` and ``b`` jointly by L-BFGS on the squared error, with L2 penalties on ``w`` and ``v``: the
probe can only leave the ridge where attention lowers the penalised training error.

It reads the same forward pass the mean pool does: two dot products per token, no second backbone pass.
It is not in the shipped head yet. ``python -m polytox.scoring.ml.attention`` measures it on the
training split's RTP-LX rows against the mean-pool ridge, alone and beside the n-gram ridge
(docs/trainscorer.md, "Attention pooling"); the held-out split is not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import require


@dataclass
class AttentionProbe:
    """A fitted probe, in standardised coordinates (``mean``, ``scale`` of the mean pool)."""

    mean: np.ndarray
    scale: np.ndarray
    v: np.ndarray  # attention query
    w: np.ndarray  # token score weights
    b: float

    def score(self, states: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """One score per text of ``states`` / ``offsets`` (``HiddenStateEmbedder.token_states``)."""
        torch = require("torch", "hf")
        x = _standardised(states, self.mean, self.scale)
        with torch.no_grad():
            return _pooled_scores(x, torch.from_numpy(_segments(offsets)), len(offsets) - 1, torch.from_numpy(self.v),
                                  torch.from_numpy(self.w), torch.tensor(self.b)).numpy().astype(np.float64)


def _standardised(states: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> Any:
    """Token states as a float32 tensor in the mean pool's standardised coordinates."""
    torch = require("torch", "hf")
    x = torch.from_numpy(np.asarray(states, dtype=np.float32))
    return (x - torch.from_numpy(np.asarray(mean, dtype=np.float32))) / torch.from_numpy(
        np.asarray(scale, dtype=np.float32))


def _segments(offsets: np.ndarray) -> np.ndarray:
    """Each token's text index."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _pooled_scores(x: Any, seg: Any, n: int, v: Any, w: Any, b: Any) -> Any:
    """sum_t softmax_t(v . x_t) (w . x_t) + b per text, softmax within each text (segment)."""
    torch = require("torch", "hf")
    s, u = x @ w, x @ v
    top = torch.full((n,), -torch.inf, dtype=u.dtype).scatter_reduce(0, seg, u, "amax")
    e = torch.exp(u - top[seg])
    total = torch.zeros(n, dtype=u.dtype).index_add(0, seg, e)
    return torch.zeros(n, dtype=u.dtype).index_add(0, seg, e * s) / total + b


def mean_pools(states: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(texts, dims) float32 mean of each text's token states (the ridge's input; 0 for a text without
    tokens)."""
    torch = require("torch", "hf")
    n = len(offsets) - 1
    sums = torch.zeros(n, states.shape[1]).index_add_(0, torch.from_numpy(_segments(offsets)),
                                                       torch.from_numpy(np.asarray(states, dtype=np.float32)))
    counts = torch.from_numpy(np.diff(offsets)).float().clamp(min=1.0)
    return (sums / counts[:, None]).numpy()


def fit_ridge(z: np.ndarray, y: np.ndarray, alpha: float, weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Weighted ridge on standardised ``z`` (intercept unpenalised): (coefficients, intercept)."""
    wt = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)
    y_mean = float(np.average(y, weights=wt))
    z_mean = np.average(z, axis=0, weights=wt)
    zc = (z - z_mean) * np.sqrt(wt)[:, None]
    coef = np.linalg.solve(zc.T @ zc + alpha * np.eye(z.shape[1]), zc.T @ ((y - y_mean) * np.sqrt(wt)))
    return coef, y_mean - float(z_mean @ coef)


def fit_attention_probe(states: np.ndarray, offsets: np.ndarray, target: np.ndarray, alpha_w: float,
                        alpha_v: float, max_iter: int = 60, weight: np.ndarray | None = None) -> AttentionProbe:
    """Fit the probe to ``target`` (one value per text), starting from the mean-pool ridge (penalty
    ``alpha_w``); ``alpha_v`` penalises the attention query (large: stays near mean pooling)."""
    torch = require("torch", "hf")
    pools = mean_pools(states, offsets)
    mean = pools.mean(axis=0)
    scale = pools.std(axis=0)
    scale[scale < 1e-6] = 1.0
    coef, intercept = fit_ridge((pools - mean) / scale, np.asarray(target, dtype=np.float64), alpha_w, weight)
    x = _standardised(states, mean, scale)
    seg = torch.from_numpy(_segments(offsets))
    n = len(offsets) - 1
    y = torch.from_numpy(np.asarray(target, dtype=np.float32))
    wt = torch.ones(n) if weight is None else torch.from_numpy(np.asarray(weight, dtype=np.float32))
    w = torch.from_numpy(coef.astype(np.float32)).requires_grad_(True)
    v = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.tensor(float(intercept), requires_grad=True)
    opt = torch.optim.LBFGS([w, v, b], lr=1, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        loss = (wt * (_pooled_scores(x, seg, n, v, w, b) - y) ** 2).sum() + alpha_w * (w ** 2).sum() \
            + alpha_v * (v ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return AttentionProbe(mean=mean.astype(np.float32), scale=scale.astype(np.float32),
                          v=v.detach().numpy().copy(), w=w.detach().numpy().copy(), b=float(b.detach()))
