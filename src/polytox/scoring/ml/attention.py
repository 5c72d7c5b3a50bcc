"""Attention pooling over the backbone's token states: a ridge on the mean pool that learns where to look.

A mean pool weighs every token alike, yet a toxic text is often toxic in two words. The attention probe
gives token ``t`` of a text the weight ``softmax_t(v . x_t)`` and scores the text as
``sum_t weight_t * (w . x_t) + b``, where ``x_t`` is the token's states in the head's layers side by side,
standardised with the mean pool's statistics. With ``v = 0`` every weight is ``1 / tokens`` and the probe
is exactly the ridge on the standardised mean pool. So the fit starts from that ridge's ``w`` and moves
``v``, ``w`` and ``b`` jointly by L-BFGS on the squared error, with L2 penalties on ``w`` and ``v``: the
probe can only leave the ridge where attention lowers the penalised training error.

It reads the same forward pass the mean pool does: two dot products per token, no second backbone pass
(``token_scores`` runs inside ``HiddenStateEmbedder``'s hooks). The shipped head uses it as the third input
of the non-English combiner (``attention_fit.fit_attention``); it was measured first on the
training split's RTP-LX rows against the mean-pool ridge (docs/default-scorer.md, "Attention pooling").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    _tensors: dict[str, tuple[Any, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def digest(self) -> str:
        """Identity of the fitted numbers (the embedding cache keys a probe's scores by it)."""
        h = hashlib.sha256()
        for array in (self.mean, self.scale, self.v, self.w, np.array([self.b])):
            h.update(np.ascontiguousarray(array, dtype=np.float32).tobytes())
        return h.hexdigest()[:12]

    @property
    def empty_score(self) -> float:
        """The score of a text without tokens: the ridge on its mean pool, which is 0 (``mean_pools``)."""
        return float((-self.mean / self.scale) @ self.w + self.b)

    def score(self, states: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """One score per text of ``states`` / ``offsets`` (``HiddenStateEmbedder.token_states``)."""
        torch = require("torch", "hf")
        x = _standardised(states, self.mean, self.scale)
        with torch.no_grad():
            out = (
                _pooled_scores(
                    x,
                    torch.from_numpy(_segments(offsets)),
                    len(offsets) - 1,
                    torch.from_numpy(self.v),
                    torch.from_numpy(self.w),
                    torch.tensor(self.b),
                )
                .numpy()
                .astype(np.float64)
            )
        out[np.diff(offsets) == 0] = self.empty_score
        return out

    def token_scores(self, hidden: Sequence[Any], keep: Any) -> Any:
        """(rows,) float32 scores of one padded batch, from each of the probe's layers' hidden states
        ((rows, width, hidden) tensors, in the head's layer order) at the positions ``keep`` (a (rows, width)
        bool tensor) marks: what ``score`` computes from the same tokens' ``token_states``."""
        torch = require("torch", "hf")
        key = str(keep.device)
        if key not in self._tensors:  # copied to the device once, not once per batch
            self._tensors[key] = tuple(
                torch.from_numpy(np.asarray(a, dtype=np.float32)).to(keep.device)
                for a in (self.mean, self.scale, self.v, self.w)
            )
        mean, scale, v, w = self._tensors[key]
        x = (torch.cat([h.float() for h in hidden], dim=-1) - mean) / scale
        u = (x @ v).masked_fill(~keep, -torch.inf)
        weight = torch.softmax(u, dim=1).nan_to_num(0.0)  # a row without kept tokens: all -inf
        out = (weight * (x @ w)).sum(1) + self.b
        return torch.where(keep.any(1), out, torch.full_like(out, self.empty_score))

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The probe as named float32 arrays (``b`` as a one-element array), for the head file."""
        return {f"{prefix}{k}": np.asarray(getattr(self, k), dtype=np.float32) for k in ("mean", "scale", "v", "w")} | {
            f"{prefix}b": np.array([self.b], dtype=np.float32)
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> AttentionProbe | None:
        """The probe stored by ``to_arrays`` (None when ``arrays`` has none)."""
        if f"{prefix}w" not in arrays:
            return None
        return cls(
            mean=arrays[f"{prefix}mean"],
            scale=arrays[f"{prefix}scale"],
            v=arrays[f"{prefix}v"],
            w=arrays[f"{prefix}w"],
            b=float(arrays[f"{prefix}b"][0]),
        )


def _standardised(states: np.ndarray, mean: np.ndarray, scale: np.ndarray, dtype: str = "float32") -> Any:
    """Token states as a ``dtype`` tensor in the mean pool's standardised coordinates: one new array, the
    same values as ``(x - mean) / scale`` computed in place, so a fit holds one copy of its states in
    ``dtype`` (the non-English probe's 713,000 fit tokens are 5.5 GB in float32; out of place they peaked at
    three copies and a 24 GB machine ran out of memory)."""
    torch = require("torch", "hf")
    x = torch.from_numpy(np.array(states, dtype=dtype, copy=True))  # never the caller's array
    x.sub_(torch.from_numpy(np.asarray(mean, dtype=dtype)))
    return x.div_(torch.from_numpy(np.asarray(scale, dtype=dtype)))


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
    sums = torch.zeros(n, states.shape[1]).index_add_(
        0, torch.from_numpy(_segments(offsets)), torch.from_numpy(np.asarray(states, dtype=np.float32))
    )
    counts = torch.from_numpy(np.diff(offsets)).float().clamp(min=1.0)
    return (sums / counts[:, None]).numpy()


def fit_ridge(z: np.ndarray, y: np.ndarray, alpha: float, weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """scikit-learn's weighted ridge (intercept unpenalised, as the head's hidden-state ridge is fitted) on
    standardised ``z``: (coefficients, intercept)."""
    linear = require("sklearn.linear_model", "ml")
    model = linear.Ridge(alpha=alpha, solver="cholesky").fit(z, y, sample_weight=weight)
    return np.asarray(model.coef_, dtype=np.float64), float(model.intercept_)


FIT_THREADS = 1
"""Threads of the probe's L-BFGS fit. With two, the gradient's sums over the 463,093 tokens came out
different in the last bits when another process loaded the CPU (the loss of the same weights did not; a
fit beside a busy process gave another probe, then another head), and L-BFGS carries such bits into the
weights (4e-6 measured). One thread gives the same bits under any load, at the same speed: the fit is
memory-bound (62 s for one thread, 70 s for two, the full fit rows on 2 cores). So a retrain from the
same caches writes the same head, byte for byte, and the probes' cached scores carry over to it."""


PROBE_ITERATIONS = 60
"""L-BFGS iteration cap of the head's probe fits (float32): short of the optimum, which the English probe,
for one, reaches after about 200 (docs/default-scorer.md, "An English probe": more iterations were measured
and not adopted)."""


# L-BFGS stopping rules of a float64 fit (``fit_attention_probe(dtype="float64")``): it runs until the
# gradient or the loss stops moving, which the float32 fit's sums cannot resolve (docs/default-scorer.md,
# "Retraining": the probes are the remaining amplifier).
CONVERGED_TOLERANCES = {"tolerance_grad": 1e-9, "tolerance_change": 1e-13}


def fit_attention_probe(
    states: np.ndarray,
    offsets: np.ndarray,
    target: np.ndarray,
    alpha_w: float,
    alpha_v: float,
    max_iter: int = PROBE_ITERATIONS,
    weight: np.ndarray | None = None,
    dtype: str = "float32",
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
    pair_weight: float = 0.0,
) -> AttentionProbe:
    """Fit the probe to ``target`` (one value per text), starting from the mean-pool ridge (penalty
    ``alpha_w``); ``alpha_v`` penalises the attention query (large: stays near mean pooling).

    ``pairs`` (text numbers ``(t, s)``) add ``pair_weight * (score_t - score_s)^2`` each to the loss: a
    consistency term between a translation and its source (``train.TrainConfig.probe_consistency_weight``).

    ``dtype="float32"`` with ``max_iter`` ``PROBE_ITERATIONS`` is the head's fit: it stops short of the
    optimum, so last-bit changes of its inputs move the probe (docs/default-scorer.md).
    ``dtype="float64"`` runs to convergence (``CONVERGED_TOLERANCES``, within ``max_iter``) and is stable,
    at several times the cost. Either way the probe is stored in float32."""
    torch = require("torch", "hf")
    pools = mean_pools(states, offsets)
    mean = pools.mean(axis=0)
    scale = pools.std(axis=0)
    scale[scale < 1e-6] = 1.0
    coef, intercept = fit_ridge((pools - mean) / scale, np.asarray(target, dtype=np.float64), alpha_w, weight)
    x = _standardised(states, mean, scale, dtype)
    seg = torch.from_numpy(_segments(offsets))
    n = len(offsets) - 1
    tdtype = getattr(torch, dtype)
    y = torch.from_numpy(np.asarray(target, dtype=dtype))
    wt = torch.ones(n, dtype=tdtype) if weight is None else torch.from_numpy(np.asarray(weight, dtype=dtype))
    w = torch.tensor(coef, dtype=tdtype, requires_grad=True)  # torch-owned: the allocator's alignment
    v = torch.zeros(x.shape[1], dtype=tdtype, requires_grad=True)
    b = torch.tensor(float(intercept), dtype=tdtype, requires_grad=True)
    tolerances = CONVERGED_TOLERANCES if dtype == "float64" else {}
    pair_t, pair_s = (None, None) if pairs is None else (torch.from_numpy(pairs[0]), torch.from_numpy(pairs[1]))
    opt = torch.optim.LBFGS(
        [w, v, b], lr=1, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe", **tolerances
    )

    def closure() -> Any:
        opt.zero_grad()
        scores = _pooled_scores(x, seg, n, v, w, b)
        loss = (wt * (scores - y) ** 2).sum() + alpha_w * (w**2).sum() + alpha_v * (v**2).sum()
        if pair_t is not None:
            loss = loss + pair_weight * ((scores[pair_t] - scores[pair_s]) ** 2).sum()
        loss.backward()
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(FIT_THREADS)
    try:
        opt.step(closure)
    finally:
        torch.set_num_threads(threads)
    return AttentionProbe(
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        v=v.detach().numpy().astype(np.float32),
        w=w.detach().numpy().astype(np.float32),
        b=float(np.float32(float(b.detach()))),
    )  # b as the head stores it
