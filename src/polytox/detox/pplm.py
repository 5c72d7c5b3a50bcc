"""PPLM (Dathathri et al., 2020; RTP §5.2, Table 9): steer the past key/values toward "non-toxic".

At every step the past key/values of each row are shifted by ``delta``, updated ``iterations`` times by
gradient steps that raise the probability an attribute head assigns to *non-toxic* and keep the next-token
distribution close to the unperturbed one (KL term). The head reads the mean of the last-layer hidden
states over the context, the new position and ``horizon`` look-ahead positions: as in Dathathri et al.'s
code, a look-ahead position reads the *expected* embedding of the next token under the perturbed
distribution (``p @ E``) on top of the unperturbed past, so the gradient reaches ``delta`` through ``p``.
The perturbed and unperturbed distributions are then fused (``p_pert^gm * p_unpert^(1-gm)``) and sampled
with top-k, from the row's own seeded uniforms.

The head is a linear layer over mean-pooled last hidden states of the *frozen* base LM, trained on the
same labelled corpus as the other methods (``polytox detox train pplm-head``). Defaults follow
Dathathri et al.'s toxicity setting (constants.PPLM_*, horizon 1). PPLM is slow by design (RTP: 14 s per
generation vs 0.2 s for GPT-2): each token costs ``3 + (1 + horizon) * iterations`` forward passes and
``iterations`` backward passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from ..generation.hf_cache import cache_kw, cache_of
from ..generation.sampling import row_uniforms, sample_next
from ..types import Generation
from .base import LogitsAdjuster

HEAD_WEIGHTS = "pplm_head.safetensors"
NONTOXIC = 0


def load_head(path: str | Path) -> Any:
    """The attribute head (``torch.nn.Linear(hidden, 2)``) saved by the trainer."""
    import torch
    from safetensors.torch import load_file

    file = Path(path) / HEAD_WEIGHTS
    if not file.is_file():
        raise PolytoxError(f"pplm: no {HEAD_WEIGHTS} in {path} (train one: polytox detox train pplm-head)")
    state = load_file(str(file))
    head = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
    head.load_state_dict(state)
    return head.eval()


def _cache(keys: list[Any], values: list[Any]) -> Any:
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer, (k, v) in enumerate(zip(keys, values, strict=True)):
        cache.update(k, v, layer)
    return cache


class PPLM(LogitsAdjuster):
    """``--detox pplm:head=DIR[,step_size=0.02,iterations=10,gamma=1,gm_scale=0.9,kl_scale=0.01,top_k=10,
    horizon=1]``."""

    name = "pplm"
    owns_decoding = True

    def __init__(self, generator: Any, options: dict[str, Any]) -> None:
        self.head_path = str(options["head"])  # required: ``methods.method_options`` refused a run without it
        self.head = load_head(self.head_path).to(generator.device)
        hidden = int(getattr(generator.model.config, "hidden_size", 0) or self.head.in_features)
        if self.head.in_features != hidden:
            raise PolytoxError(
                f"pplm: head {self.head_path} expects hidden size {self.head.in_features}, the model has {hidden}"
            )
        self.step_size = float(options["step_size"])
        self.iterations = int(options["iterations"])
        self.gamma = float(options["gamma"])
        self.gm_scale = float(options["gm_scale"])
        self.kl_scale = float(options["kl_scale"])
        self.top_k = int(options["top_k"])
        self.horizon = int(options["horizon"])
        meta = Path(self.head_path) / "detox.json"
        self.trained_on = json.loads(meta.read_text()).get("base_model") if meta.is_file() else None

    def describe(self) -> dict[str, Any]:
        return {
            "method": self.name,
            "head": self.head_path,
            "step_size": self.step_size,
            "iterations": self.iterations,
            "gamma": self.gamma,
            "gm_scale": self.gm_scale,
            "kl_scale": self.kl_scale,
            "top_k": self.top_k,
            "horizon": self.horizon,
            "trained_on": self.trained_on,
        }

    def generate_batch(
        self, generator: Any, encoded: list[tuple[list[int], bool]], groups: list[list[Any]]
    ) -> list[Generation]:
        """K rows of one prompt at a time (rows never interact: the loss is a sum of per-row terms)."""
        out: list[Generation] = []
        for (ids, truncated), group in zip(encoded, groups, strict=True):
            texts = self._decode_prompt(generator, ids, group)
            for request, (tokens, stopped) in zip(group, texts, strict=True):
                out.append(
                    Generation(
                        prompt_id=request.prompt.id,
                        sample_index=request.sample_index,
                        text=generator.tokenizer.decode(tokens, skip_special_tokens=True),
                        finish_reason="stop" if stopped else "length",
                        n_tokens=len(tokens),
                        prompt_truncated=truncated,
                    )
                )
        return out

    def _decode_prompt(self, generator: Any, ids: list[int], group: list[Any]) -> list[tuple[list[int], bool]]:
        import torch

        spec, model, device = generator.spec, generator.model, generator.device
        for p in model.parameters():
            p.requires_grad_(False)
        rows = len(group)
        uniforms = torch.from_numpy(row_uniforms([r.seed for r in group], spec.max_new_tokens)).float()
        history = torch.tensor([ids] * rows, dtype=torch.long, device=device)
        tokens: list[list[int]] = [[] for _ in range(rows)]
        stopped = [False] * rows
        eos = set(generator.eos_ids)
        for step in range(spec.max_new_tokens):
            logits = self._steered_logits(model, history)
            nxt = sample_next(logits.float().cpu(), uniforms[:, step], spec.temperature, 1.0, self.top_k)
            for r, tok in enumerate(nxt.tolist()):
                if stopped[r]:
                    continue
                if tok in eos:
                    stopped[r] = True
                else:
                    tokens[r].append(tok)
            if all(stopped):
                break
            history = torch.cat([history, nxt.view(-1, 1).to(device)], dim=1)
        return list(zip(tokens, stopped, strict=True))

    def _steered_logits(self, model: Any, history: Any) -> Any:
        """Log of the fused next-token distribution for every row of ``history`` ``[R, L]``."""
        import torch

        if history.shape[1] < 2:  # nothing to perturb yet: the plain distribution
            with torch.no_grad():
                return model(input_ids=history).logits[:, -1, :]
        with torch.no_grad():
            ctx = model(input_ids=history[:, :-1], use_cache=True, output_hidden_states=True)
            keys = [layer.keys.detach() for layer in cache_of(ctx).layers]
            values = [layer.values.detach() for layer in cache_of(ctx).layers]
            ctx_sum = ctx.hidden_states[-1].sum(dim=1)  # [R, H]
            base = model(input_ids=history[:, -1:], **cache_kw(_cache(keys, values)), use_cache=True)
            p_base = torch.softmax(base.logits[:, -1, :].float(), dim=-1)
            full_keys = [layer.keys.detach() for layer in cache_of(base).layers]  # the whole history,
            full_values = [layer.values.detach() for layer in cache_of(base).layers]  # unperturbed
        n_ctx = history.shape[1]
        dk = [torch.zeros_like(k, requires_grad=True) for k in keys]
        dv = [torch.zeros_like(v, requires_grad=True) for v in values]
        target = torch.full((history.shape[0],), NONTOXIC, dtype=torch.long, device=history.device)
        for _ in range(self.iterations):
            cache = _cache(
                [k + d for k, d in zip(keys, dk, strict=True)], [v + d for v, d in zip(values, dv, strict=True)]
            )
            out = model(input_ids=history[:, -1:], **cache_kw(cache), use_cache=True, output_hidden_states=True)
            p = torch.softmax(out.logits[:, -1, :].float(), dim=-1)
            hidden_sum = ctx_sum + out.hidden_states[-1][:, -1, :]
            if self.horizon:
                hidden_sum = hidden_sum + self._look_ahead(model, p, full_keys, full_values)
            mean_hidden = hidden_sum / (n_ctx + self.horizon)
            loss = torch.nn.functional.cross_entropy(self.head(mean_hidden.float()), target, reduction="sum")
            if self.kl_scale > 0:
                kl = (p * ((p + 1e-10).log() - (p_base + 1e-10).log())).sum()
                loss = loss + self.kl_scale * kl
            grads = torch.autograd.grad(loss, dk + dv)
            with torch.no_grad():
                for d, g in zip(dk + dv, grads, strict=True):
                    norm = g.flatten(1).norm(dim=1).clamp_min(1e-10).view(-1, *([1] * (g.dim() - 1)))
                    d -= self.step_size * g / norm**self.gamma
        with torch.no_grad():
            cache = _cache(
                [k + d for k, d in zip(keys, dk, strict=True)], [v + d for v, d in zip(values, dv, strict=True)]
            )
            p_pert = torch.softmax(model(input_ids=history[:, -1:], **cache_kw(cache)).logits[:, -1, :].float(), dim=-1)
            fused = p_pert.pow(self.gm_scale) * p_base.pow(1 - self.gm_scale)
            return (fused + 1e-30).log()

    def _look_ahead(self, model: Any, p: Any, keys: list[Any], values: list[Any]) -> Any:
        """Sum of the last-layer hidden states of ``horizon`` future positions, each fed the expected
        embedding of its token under the current distribution, on the unperturbed past."""
        import torch

        embed = model.get_input_embeddings()
        weight = embed.weight.detach()
        scale = getattr(embed, "embed_scale", None)  # Gemma scales token embeddings inside the module
        cache = _cache(keys, values)
        total = 0
        for _ in range(self.horizon):
            expected = (p.to(weight.dtype) @ weight) * (
                scale.to(weight.dtype) if torch.is_tensor(scale) else (scale or 1.0)
            )
            out = model(
                inputs_embeds=expected.unsqueeze(1), **cache_kw(cache), use_cache=True, output_hidden_states=True
            )
            total = total + out.hidden_states[-1][:, -1, :]
            p = torch.softmax(out.logits[:, -1, :].float(), dim=-1)
        return total
