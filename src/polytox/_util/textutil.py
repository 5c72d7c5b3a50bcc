"""Small text helpers shared across polytox: cutting a text to a UTF-8 byte budget on a character boundary.

Perspective accepts at most 20,480 bytes of UTF-8 per comment (DATA.md), and PTP truncated documents to
that size before scoring them (PTP Appendix A). Both the Perspective scorer and ``polytox build`` use
``truncate_utf8`` so the two cut texts identically.
"""

from __future__ import annotations


def utf8_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes (lone surrogates count as 3 bytes, as ``surrogatepass`` writes them)."""
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding is at most ``max_bytes`` bytes.

    The cut never splits a character: a multi-byte character that does not fit entirely is dropped whole.
    A text already within the budget is returned unchanged (the same object).
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    # Fast path: every character is at most 4 bytes, so short texts always fit.
    if len(text) * 4 <= max_bytes:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    cut = max_bytes
    # Step back over continuation bytes (10xxxxxx) to the start of the character that straddles the cut.
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass")
