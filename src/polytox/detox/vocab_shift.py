"""VOCAB-SHIFT (RTP §5.2, Appendix B.3): add beta * W_t[nontoxic] to the logits at every step.

``W_t`` is a learned ``V x 2`` projection of the label space {non-toxic, toxic} onto the vocabulary,
trained with the LM frozen and the LM loss on a balanced toxic / non-toxic corpus
(``polytox detox train vocab-shift``). It is saved as ``vocab_shift.safetensors`` (tensor ``W``, column 0
non-toxic, column 1 toxic) beside ``detox.json`` naming the base model it was trained with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from .base import LogitsAdjuster

WEIGHTS = "vocab_shift.safetensors"
NONTOXIC, TOXIC = 0, 1


def load_shift(path: str | Path) -> Any:
    """The ``[V, 2]`` projection saved by the trainer."""
    from safetensors.torch import load_file

    file = Path(path) / WEIGHTS if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise PolytoxError(f"vocab-shift: no {WEIGHTS} at {path} (train one: polytox detox train vocab-shift)")
    return load_file(str(file))["W"].float()


class VocabShift(LogitsAdjuster):
    """``--detox vocab-shift:path=DIR[,beta=3]``."""

    name = "vocab-shift"

    def __init__(self, generator: Any, options: dict[str, Any]) -> None:
        self.path = str(options["path"])  # required: ``methods.method_options`` refused a run without it
        self.beta = float(options["beta"])
        self.W = load_shift(self.path)
        meta = Path(self.path) / "detox.json"
        self.base = json.loads(meta.read_text()).get("base_model") if meta.is_file() else None
        self.bias = (self.beta * self.W[:, NONTOXIC]).to(generator.device)

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        v = min(logits.shape[-1], self.bias.shape[0])
        out = logits.clone()
        out[:, :v] += self.bias[:v].to(out.dtype)
        return out

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "path": self.path, "beta": self.beta, "trained_on": self.base}
