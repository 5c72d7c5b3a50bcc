"""ATCON at generation (RTP §5.1): prepend the ``<|nontoxic|>`` attribute token to every prompt, and never
sample an attribute token.

The model itself comes from ``polytox detox train atcon`` (attribute tokens added to the vocabulary and
prepended to its training documents); pass it with ``--model`` and add ``--detox atcon``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .. import constants as C
from .._util.options import Option
from ..errors import PolytoxError
from .base import LogitsAdjuster
from .methods import METHODS


class AttributeToken(LogitsAdjuster):
    """``--detox atcon[:token=<|nontoxic|>]``."""

    name = "atcon"
    OPTIONS: ClassVar[Mapping[str, Option]] = METHODS[name][2]

    def __init__(self, generator: Any, options: dict[str, Any]) -> None:
        self.token = options["token"] or self.OPTIONS["token"].default  # ``token=`` (empty): the row's default
        ids = generator.tokenizer.convert_tokens_to_ids([self.token])
        unk = generator.tokenizer.unk_token_id
        if not ids or ids[0] is None or (unk is not None and ids[0] == unk):
            raise PolytoxError(
                f"--detox atcon: the model's vocabulary has no {self.token!r} token; "
                f"train one with: polytox detox train atcon"
            )
        self.token_id = int(ids[0])
        # Both attribute tokens are read, never written: training masks them from the labels, and generation
        # bans them, so a continuation cannot switch its own attribute.
        others = [C.ATCON_NONTOXIC_TOKEN, C.ATCON_TOXIC_TOKEN, self.token]
        self.banned = sorted(
            {int(i) for i in generator.tokenizer.convert_tokens_to_ids(others) if i is not None and i != unk}
        )

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        banned = [i for i in self.banned if i < logits.shape[-1]]
        if not banned:
            return logits
        out = logits.clone()
        out[:, banned] = float("-inf")
        return out

    def prefix(self, ids: list[int]) -> list[int]:
        return [self.token_id, *ids]

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "token": self.token, "token_id": self.token_id}
