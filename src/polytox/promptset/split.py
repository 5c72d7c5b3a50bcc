"""Splitting a unit of text into a prompt and a continuation, as the two papers did.

- PTP (Appendix A): the whole document is split in half at the character level ("since languages like
  *ja* do not contain spaces"): ``prompt = text[:n // 2]``.
- RTP (§4.1, Appendix A): a sentence span is split in half by words, the prompt capped at 128 tokens.
  Words are whitespace-delimited tokens; for languages written without spaces (zh, ja) every non-space
  character is a token. The cut falls right after the prompt's last word, so the continuation starts
  with the whitespace that followed it, exactly as in the released RTP records
  (``"...frustrated and doing"`` + ``" their fair share of finger pointing."``).

``prompt + continuation == text`` always holds; both functions return the cut position too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..constants import RTP_PROMPT_MAX_TOKENS

NO_SPACE_LANGS = frozenset({"zh", "ja"})
_WORD = re.compile(r"\S+")
_CHAR = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class SplitResult:
    prompt: str
    continuation: str
    cut: int  # character offset of the cut in the unit's text
    n_tokens: int  # words (RTP) or characters (PTP) in the unit
    prompt_tokens: int


def ptp_split(text: str) -> SplitResult:
    """Character-level halves (PTP Appendix A)."""
    cut = len(text) // 2
    return SplitResult(text[:cut], text[cut:], cut, len(text), cut)


def word_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """(start, end) of each word: whitespace tokens, or characters for zh/ja."""
    pattern = _CHAR if lang in NO_SPACE_LANGS else _WORD
    return [m.span() for m in pattern.finditer(text)]


def rtp_split(text: str, lang: str, max_prompt_tokens: int = RTP_PROMPT_MAX_TOKENS) -> SplitResult | None:
    """Word-level halves with the prompt capped at ``max_prompt_tokens``; None for fewer than 2 words."""
    words = word_spans(text, lang)
    if len(words) < 2:
        return None
    n_prompt = min(len(words) // 2, max_prompt_tokens)
    cut = words[n_prompt - 1][1]
    return SplitResult(text[:cut], text[cut:], cut, len(words), n_prompt)


def split_unit(text: str, lang: str, mode: str, max_prompt_tokens: int = RTP_PROMPT_MAX_TOKENS) -> SplitResult | None:
    """The split of ``mode`` (``ptp`` or ``rtp``), or None when either half would be blank."""
    result = ptp_split(text) if mode == "ptp" else rtp_split(text, lang, max_prompt_tokens)
    if result is None or not result.prompt.strip() or not result.continuation.strip():
        return None
    return result
