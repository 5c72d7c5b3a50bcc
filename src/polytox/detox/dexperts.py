"""DExperts (Liu et al., 2021): ``logits = base + alpha * (expert - anti_expert)`` at every step.

The expert is a causal LM adapted on non-toxic text and the anti-expert one adapted on toxic text
(``polytox detox train dapt --subset nontoxic|toxic``); both must share the base model's tokenizer.
Each step re-reads every row's full history through both experts (no KV cache): simple and exactly
batch-invariant, at the cost of quadratic work in the continuation length, which at RTP's 20 tokens is
about twice the base model's own cost per expert.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import constants as C
from ..errors import PolytoxError, require
from ..generation.prompting import left_padded
from .base import LogitsAdjuster, need, option


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


def history_logits(model: Any, histories: Sequence[Sequence[int]], pad_id: int, device: str) -> Any:
    """Last-position logits of each history, left-padded into one batch."""
    import torch

    ids, mask, positions = left_padded(histories, pad_id)
    with torch.inference_mode():
        out = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                    logits_to_keep=1, use_cache=False)
    return out.logits[:, -1, :]


class DExperts(LogitsAdjuster):
    """``--detox dexperts:expert=DIR,anti=DIR[,alpha=2.0]``."""

    name = "dexperts"

    def __init__(self, generator: Any, options: dict[str, str]) -> None:
        self.expert_path = need(options, "expert", self.name, "an LM trained on non-toxic text")
        self.anti_path = need(options, "anti", self.name, "an LM trained on toxic text")
        self.alpha = option(options, "alpha", C.DEXPERTS_ALPHA, float)
        self.device = generator.device
        self.pad_id = generator.pad_id
        self.expert, tok_e = load_lm(self.expert_path, generator.device, generator.dtype)
        self.anti, tok_a = load_lm(self.anti_path, generator.device, generator.dtype)
        for path, tok in ((self.expert_path, tok_e), (self.anti_path, tok_a)):
            if not same_vocab(tok, generator.tokenizer):
                raise PolytoxError(f"--detox dexperts: {path} does not share the base model's tokenizer")

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        e = history_logits(self.expert, histories, self.pad_id, self.device)
        a = history_logits(self.anti, histories, self.pad_id, self.device)
        v = min(logits.shape[-1], e.shape[-1], a.shape[-1])
        out = logits.clone()
        out[:, :v] += self.alpha * (e[:, :v] - a[:, :v]).to(out.dtype)
        return out

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "expert": self.expert_path, "anti": self.anti_path, "alpha": self.alpha}
