"""``--detox`` on the vLLM backend: the word filter becomes banned token sequences.

vLLM's public ``SamplingParams(bad_words=...)`` tokenizes each word as written and after a space, but keeps
the space-prefixed form only when it has as many tokens as the bare word. With byte-level BPE that drops
many mid-sentence spellings: on SmolLM2, "stupid" is 3 tokens and " stupid" one, so " stupid" stays
allowed (228 of LDNOOBW English's 803 cased forms are dropped so). With the engine's tokenizer at hand the
backend therefore bans the token sequences itself: each listed word, as written and capitalised, at a text
start and after a space (``bad_word_sequences``), handed to vLLM's bad-words sampler. That is a token-level
approximation of the transformers backend's text-level filter. The other methods need the transformers
backend's logits hook or their own decoding loop and are refused with a clear error.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import PolytoxError
from .methods import parse_detox
from .wordlists import default_list, read_list


@lru_cache(maxsize=8)
def _terms(source: str) -> tuple[str, ...]:
    return tuple(read_list(source))


def banned_words(detox: str) -> list[str]:
    """The word filter's terms as written and capitalised; other methods are refused."""
    name, options = parse_detox(detox)
    if name != "word-filter":
        raise PolytoxError(f"--detox {name} runs on the transformers backend only (vLLM maps word-filter alone)")
    words = _terms(options.get("list") or default_list())
    return sorted({*words, *(w.capitalize() for w in words)})


def vllm_sampling_extras(detox: str) -> dict[str, list[str]]:
    """``SamplingParams`` keyword arguments for ``detox`` without a tokenizer: vLLM's own ``bad_words``."""
    return {"bad_words": banned_words(detox)}


def bad_word_sequences(detox: str, tokenizer: Any) -> list[list[int]]:
    """Every token sequence that spells a listed word at a text start or after a space."""
    seqs: set[tuple[int, ...]] = set()
    for word in banned_words(detox):
        for text in (word, " " + word):
            ids = tokenizer.encode(text, add_special_tokens=False)
            if ids:
                seqs.add(tuple(ids))
    return [list(s) for s in sorted(seqs)]
