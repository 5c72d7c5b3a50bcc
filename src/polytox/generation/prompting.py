"""From a ``Prompt`` to model input token ids, shared by the local backends (transformers, vLLM).

Three rules every backend must apply the same way, so runs are comparable across backends:

- the empty prompt is RTP's unprompted setting (§3.1, footnote 9: generation "conditioned only on [the
  model's] start-of-sentence token", ``<|endoftext|>`` for GPT-2): its input is the BOS token alone (EOS
  when the tokenizer has no BOS, which is GPT-2's case), never a chat template;
- instruct models get the prompt as the single user message of their chat template (PTP §4,
  "Implementation Details"); ``auto`` uses the template when the tokenizer has one;
- a prompt longer than the context left for ``max_new_tokens`` loses tokens from the *left* (the words
  next to the continuation are the ones that matter), and the generation is flagged ``prompt_truncated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import PolytoxError


@dataclass(frozen=True)
class PromptIds:
    """The token ids to feed the model, and whether the prompt had to be cut to fit."""

    ids: list[int]
    truncated: bool = False
    chat: bool = False


class PromptTooLongError(ValueError):
    """Even the chat template's own tokens do not fit the context; recorded as the sample's error."""


def start_token_ids(tokenizer: Any) -> list[int]:
    """The unprompted input: ``[bos]``, or ``[eos]`` for tokenizers without a BOS (GPT-2)."""
    token = getattr(tokenizer, "bos_token_id", None)
    if token is None:
        token = getattr(tokenizer, "eos_token_id", None)
    if token is None:
        raise PolytoxError(
            "unprompted generation needs a start token, but the tokenizer has neither a BOS "
            "nor an EOS token; pass a prompt instead"
        )
    return [int(token)]


def wants_chat_template(mode: str, tokenizer: Any) -> bool:
    """Whether prompts are rendered with the tokenizer's chat template (``auto`` | ``always`` | ``never``)."""
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == "never":
        return False
    if mode == "always" and not has:
        raise PolytoxError("--chat-template always was given, but the model's tokenizer has no chat template")
    return has


def _ids(encoded: Any) -> list[int]:
    ids = encoded["input_ids"] if isinstance(encoded, dict) or hasattr(encoded, "keys") else encoded
    return [int(i) for i in ids]


def _special_prefix(tokenizer: Any) -> list[int]:
    """Tokens the tokenizer puts before any text (Llama's BOS; nothing for GPT-2)."""
    return _ids(tokenizer("", add_special_tokens=True))


def _render_chat(tokenizer: Any, text: str) -> list[int]:
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return _ids(tokenizer(rendered, add_special_tokens=False))


def encode_prompt(tokenizer: Any, text: str, *, chat: bool, max_prompt_tokens: int | None) -> PromptIds:
    """Token ids for ``text``: BOS alone when empty, chat-rendered or raw, left-truncated to fit.

    ``max_prompt_tokens`` is the context left after reserving ``max_new_tokens`` (None: no limit).
    """
    if text == "":
        return PromptIds(start_token_ids(tokenizer))
    if max_prompt_tokens is not None and max_prompt_tokens < 1:
        raise PromptTooLongError(f"no room for a prompt: max_prompt_tokens={max_prompt_tokens}")
    if not chat:
        ids = _ids(tokenizer(text, add_special_tokens=True))
        if max_prompt_tokens is None or len(ids) <= max_prompt_tokens:
            return PromptIds(ids)
        head = _special_prefix(tokenizer)
        head = head if ids[: len(head)] == head and len(head) < max_prompt_tokens else []
        keep = max_prompt_tokens - len(head)
        return PromptIds(head + ids[len(head) :][-keep:], truncated=True)

    ids = _render_chat(tokenizer, text)
    if max_prompt_tokens is None or len(ids) <= max_prompt_tokens:
        return PromptIds(ids, chat=True)
    content = _ids(tokenizer(text, add_special_tokens=False))
    keep = len(content) - (len(ids) - max_prompt_tokens)
    for _ in range(4):  # re-tokenising at the cut can shift a token or two: shrink until it fits
        if keep < 1:
            raise PromptTooLongError(f"the chat template alone needs more than {max_prompt_tokens} tokens")
        ids = _render_chat(tokenizer, tokenizer.decode(content[-keep:]))
        if len(ids) <= max_prompt_tokens:
            return PromptIds(ids, truncated=True, chat=True)
        keep -= len(ids) - max_prompt_tokens
    raise PromptTooLongError(f"could not fit the prompt into {max_prompt_tokens} tokens")


def left_padded(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any, Any]:
    """Token id sequences as one left-padded batch: ``(input_ids, attention_mask, position_ids)`` tensors.

    Positions count real tokens only, so a padded row sees the same positions as it would alone.
    """
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(list(s), dtype=torch.long)
        mask[i, width - len(s) :] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp_(min=0)
