"""DExperts (Liu et al., 2021): ``logits = base + alpha * (expert - anti_expert)`` at every step.

The expert is a causal LM adapted on non-toxic text and the anti-expert one adapted on toxic text
(``polytox detox train dapt --subset nontoxic|toxic``); both must share the base model's tokenizer.
Each expert keeps its own KV cache (``IncrementalLogits``): a step whose histories extend the previous
step's by one token (finished rows may have been dropped) feeds only the new tokens, so an expert costs
about what the base model costs per step. Any other call is a fresh prefill, which is always correct: a
cached row's keys and values are exactly those of its history, whichever batch it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import PolytoxError, require
from ..generation.hf_cache import cache_kw, cache_of
from ..generation.prompting import left_padded
from .base import LogitsAdjuster


def load_lm(path: str, device: str, dtype: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of a causal LM path or alias, in eval mode on ``device``."""
    from ..models import resolve_model

    transformers = require("transformers", "hf")
    resolved, _ = resolve_model(path)
    tok = transformers.AutoTokenizer.from_pretrained(resolved)
    model = transformers.AutoModelForCausalLM.from_pretrained(resolved, dtype=dtype)
    return model.to(device).eval(), tok


def same_vocab(a: Any, b: Any) -> bool:
    return bool(a.get_vocab() == b.get_vocab())


class IncrementalLogits:
    """Last-position logits of a batch of growing token histories under one causal LM, with a KV cache."""

    def __init__(self, model: Any, pad_id: int, device: str) -> None:
        self.model, self.pad_id, self.device = model, pad_id, device
        self.reset()

    def reset(self) -> None:
        """Forget the cached histories (and free their keys and values)."""
        self.histories: list[tuple[int, ...]] = []
        self.cache: Any = None
        self.mask: Any = None
        self.next_pos: Any = None
        self.logits: Any = None

    def __call__(self, histories: Sequence[Sequence[int]]) -> Any:
        keys = [tuple(h) for h in histories]
        parents = self._parents(keys)
        return self._prefill(keys) if parents is None else self._extend(keys, parents)

    def _parents(self, keys: list[tuple[int, ...]]) -> list[tuple[int, bool]] | None:
        """For each history, its cached row (rows keep their order; dropped rows may be missing) and whether
        it grew by one token since (a finished row does not grow); None when some history is not cached."""
        if self.cache is None or len(keys) > len(self.histories):
            return None
        parents, j = [], 0
        for key in keys:
            while j < len(self.histories):
                cached = self.histories[j]
                if cached == key or (len(key) == len(cached) + 1 and key[:-1] == cached):
                    break
                j += 1
            if j == len(self.histories):
                return None
            parents.append((j, len(key) > len(self.histories[j])))
            j += 1
        return parents

    def _prefill(self, keys: list[tuple[int, ...]]) -> Any:
        import torch
        from transformers import DynamicCache

        from ..generation.hf import select_rows

        unique: dict[tuple[int, ...], int] = {}
        inverse = torch.tensor([unique.setdefault(k, len(unique)) for k in keys], device=self.device)
        ids, mask, positions = left_padded(list(unique), self.pad_id)
        with torch.inference_mode():
            out = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                **cache_kw(DynamicCache()),
                use_cache=True,
                logits_to_keep=1,
            )
        self.cache = cache_of(out)
        select_rows(self.cache, inverse)  # the K samples of one prompt share its prefill
        self.mask = mask.to(self.device)[inverse]
        self.next_pos = torch.tensor([len(k) for k in keys], device=self.device)
        self.histories = keys
        self.logits = out.logits[:, -1, :][inverse]
        return self.logits

    def _extend(self, keys: list[tuple[int, ...]], parents: list[tuple[int, bool]]) -> Any:
        """One cached step: grown rows read their new token; a row that did not grow reads a masked pad
        (its cache stays that of its history) and keeps its previous logits."""
        import torch

        from ..generation.hf import select_rows

        index = torch.tensor([j for j, _ in parents], device=self.device)
        grew = torch.tensor([g for _, g in parents], device=self.device)
        if len(parents) != len(self.histories):
            select_rows(self.cache, index)
            self.mask, self.next_pos, self.logits = self.mask[index], self.next_pos[index], self.logits[index]
        width = self.mask.shape[1]
        self.mask = torch.cat([self.mask, grew.view(-1, 1).to(self.mask.dtype)], dim=1)
        last = torch.tensor(
            [k[-1] if g else self.pad_id for k, (_, g) in zip(keys, parents, strict=True)], device=self.device
        ).view(-1, 1)
        with torch.inference_mode():
            out = self.model(
                input_ids=last,
                attention_mask=self.mask,
                position_ids=self.next_pos.view(-1, 1),
                **cache_kw(self.cache),
                use_cache=True,
                cache_position=torch.tensor([width], device=self.device),
            )
        self.cache = cache_of(out)
        self.next_pos = self.next_pos + grew.long()
        self.histories = keys
        self.logits = torch.where(grew.view(-1, 1), out.logits[:, -1, :], self.logits)
        return self.logits


class DExperts(LogitsAdjuster):
    """``--detox dexperts:expert=DIR,anti=DIR[,alpha=2.0]``."""

    name = "dexperts"

    def __init__(self, generator: Any, options: dict[str, Any]) -> None:
        self.expert_path = str(options["expert"])  # required, both: ``methods.method_options`` checked them
        self.anti_path = str(options["anti"])
        self.alpha = float(options["alpha"])
        self.expert, tok_e = load_lm(self.expert_path, generator.device, generator.dtype)
        self.anti, tok_a = load_lm(self.anti_path, generator.device, generator.dtype)
        self.expert_logits = IncrementalLogits(self.expert, generator.pad_id, generator.device)
        self.anti_logits = IncrementalLogits(self.anti, generator.pad_id, generator.device)
        for path, tok in ((self.expert_path, tok_e), (self.anti_path, tok_a)):
            if not same_vocab(tok, generator.tokenizer):
                raise PolytoxError(f"--detox dexperts: {path} does not share the base model's tokenizer")

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        e = self.expert_logits(histories)
        a = self.anti_logits(histories)
        if last:  # the batch is done: free both caches
            self.expert_logits.reset()
            self.anti_logits.reset()
        v = min(logits.shape[-1], e.shape[-1], a.shape[-1])
        out = logits.clone()
        out[:, :v] += self.alpha * (e[:, :v] - a[:, :v]).to(out.dtype)
        return out

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "expert": self.expert_path, "anti": self.anti_path, "alpha": self.alpha}
