"""``--detox`` on the vLLM backend: the word filter maps to ``SamplingParams(bad_words=...)``.

vLLM bans the token sequences of each listed word (with and without a leading space), a token-level
approximation of the text-level filter of the transformers backend. The other methods need the
transformers backend's logits hook or their own decoding loop and are refused with a clear error.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import PolytoxError
from .methods import parse_detox
from .wordlists import default_list, read_list


@lru_cache(maxsize=8)
def _terms(source: str) -> tuple[str, ...]:
    return tuple(read_list(source))


def vllm_sampling_extras(detox: str) -> dict[str, list[str]]:
    """Extra ``SamplingParams`` keyword arguments for ``detox``."""
    name, options = parse_detox(detox)
    if name != "word-filter":
        raise PolytoxError(f"--detox {name} runs on the transformers backend only (vLLM maps word-filter alone)")
    words = list(_terms(options.get("list") or default_list()))
    # both spellings vLLM can see at a word start: as written and capitalised
    return {"bad_words": sorted({*words, *(w.capitalize() for w in words)})}
