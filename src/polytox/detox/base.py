"""The decoding-time interface: a ``LogitsAdjuster`` rewrites next-token logits before sampling.

The generation backend calls ``adjust(logits[rows, V], histories, last)`` once per decoding step, where
``histories[i]`` is row ``i``'s full token history (prompt ids, then the tokens sampled so far) and
``last`` says whether this is the final step. An adjuster is a pure function of that history and the
logits, so a row's output never depends on its batch neighbours: per-sample seeded determinism and exact
resume carry over unchanged. ``prefix`` may rewrite the prompt ids once (ATCON's attribute token); an
adjuster with ``owns_decoding`` (PPLM) replaces the backend's decoding loop for a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..errors import PolytoxError


class LogitsAdjuster:
    """Base class: identity on prompts and logits."""

    name: ClassVar[str] = "none"
    owns_decoding: ClassVar[bool] = False

    def prefix(self, ids: list[int]) -> list[int]:
        """Prompt token ids as the model should see them."""
        return ids

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        """Next-token logits ``[rows, V]`` given each row's token history."""
        return logits

    def generate_batch(
        self, generator: Any, encoded: list[tuple[list[int], bool]], groups: list[list[Any]]
    ) -> list[Any]:
        """Own decoding loop (only when ``owns_decoding``)."""
        raise PolytoxError(f"detox method {self.name!r} does not run its own decoding loop")

    def describe(self) -> dict[str, Any]:
        return {"method": self.name}
