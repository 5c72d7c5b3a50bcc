"""Decoding hooks: what the backends call where ``--detox`` changes decoding, without importing ``polytox.detox``.

``polytox.detox`` registers the ``detox.*`` hooks in ``polytox.registry`` when it is imported (it sits above
generation and imports its helpers; generation only calls the hooks by name). The transformers backend asks for
a ``DecodingHook`` bound to its loaded model; the vLLM backend maps the word filter to banned token sequences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .. import registry


class DecodingHook(Protocol):
    """A decoding-time method as the transformers backend calls it (``polytox.detox.base.LogitsAdjuster``)."""

    owns_decoding: bool

    def prefix(self, ids: list[int]) -> list[int]:
        """Prompt token ids as the model should see them (ATCON prepends its attribute token)."""
        ...

    def adjust(self, logits: Any, histories: Sequence[Sequence[int]], last: bool = False) -> Any:
        """Next-token logits ``[rows, V]`` given each row's token history."""
        ...

    def generate_batch(
        self, generator: Any, encoded: list[tuple[list[int], bool]], groups: list[list[Any]]
    ) -> list[Any]:
        """A batch decoded by the method's own loop (only when ``owns_decoding``: PPLM)."""
        ...


def check_decoding(spec: Any) -> None:
    """Refuse ``spec.detox`` before any work when its method cannot run as given (a required option missing)."""
    if getattr(spec, "detox", ""):
        registry.hook("detox.check")(spec.detox)


def decoding_hook(spec: Any, generator: Any) -> DecodingHook | None:
    """The hook of ``spec.detox`` bound to a loaded transformers generator; None without ``--detox``."""
    if not getattr(spec, "detox", ""):
        return None
    hook: DecodingHook | None = registry.hook("detox.adjuster")(spec, generator)
    return hook


def vllm_bad_words(detox: str) -> dict[str, list[str]]:
    """``SamplingParams`` keywords for ``detox`` on vLLM (``bad_words``); methods vLLM cannot run are refused."""
    extras: dict[str, list[str]] = registry.hook("detox.vllm_sampling")(detox)
    return extras


def vllm_bad_word_ids(detox: str, tokenizer: Any) -> list[list[int]]:
    """Every token sequence that spells a word ``detox`` bans, at a text start or after a space."""
    ids: list[list[int]] = registry.hook("detox.vllm_bad_words")(detox, tokenizer)
    return ids
