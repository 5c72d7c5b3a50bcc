"""Counting GPT-4 tokens (cl100k_base) offline, for the prompt-length statistics (PTP Figure 10b).

``splintr-rs`` carries cl100k_base compiled in, so it needs no network (DATA.md). ``tiktoken`` is used
when its cache already holds cl100k_base (``TIKTOKEN_CACHE_DIR``); otherwise it would download, which
polytox never triggers. Without either, lengths fall back to an approximation (UTF-8 bytes / 4) and the
statistics say so.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._util.textutil import utf8_len

TIKTOKEN_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@dataclass(frozen=True)
class TokenCounter:
    """``count(text)`` and where the numbers come from (``exact`` False for the approximation)."""

    count: Callable[[str], int]
    backend: str
    exact: bool
    note: str = ""


def _tiktoken_cache_has_cl100k() -> bool:
    folder = (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or str(Path(tempfile.gettempdir()) / "data-gym-cache")
    )
    return (Path(folder) / hashlib.sha1(TIKTOKEN_CL100K_URL.encode()).hexdigest()).exists()


def gpt4_token_counter(prefer: str = "auto") -> TokenCounter:
    """The best offline cl100k_base counter available (``prefer``: auto | splintr | tiktoken | approx)."""
    if prefer in ("auto", "splintr"):
        try:
            import splintr

            tok = splintr.Tokenizer.from_pretrained("cl100k_base")
            return TokenCounter(lambda text: len(tok.encode_ordinary(text)), "splintr-rs cl100k_base", True)
        except ImportError:
            if prefer == "splintr":
                raise
    if prefer in ("auto", "tiktoken") and _tiktoken_cache_has_cl100k():
        try:
            import tiktoken

            enc = tiktoken.get_encoding("cl100k_base")
            return TokenCounter(lambda text: len(enc.encode_ordinary(text)), "tiktoken cl100k_base (cache)", True)
        except ImportError:
            pass
    return TokenCounter(
        lambda text: (utf8_len(text) + 3) // 4,
        "approximation",
        False,
        "cl100k_base is not available offline (pip install splintr-rs, or fill tiktoken's "
        "cache); lengths are UTF-8 bytes / 4, not GPT-4 tokens",
    )
