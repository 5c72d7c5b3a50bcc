"""The shared UTF-8 byte cut (Perspective's 20,480-byte limit, PTP Appendix A)."""

from __future__ import annotations

import pytest

from polytox._util.textutil import truncate_utf8, utf8_len
from polytox.constants import PERSPECTIVE_MAX_BYTES


@pytest.mark.parametrize("char", ["a", "é", "中", "ह", "😀"])
def test_cut_never_splits_a_character(char: str) -> None:
    width = len(char.encode())
    text = char * 10_000
    for budget in range(0, 4 * width + 1):
        cut = truncate_utf8(text, budget)
        assert cut == char * (budget // width)
        assert utf8_len(cut) <= budget


def test_exact_budget_at_20480_bytes() -> None:
    # 1 ASCII byte + 6826 three-byte characters = 20,479 bytes; one more 3-byte character does not fit.
    text = "x" + "中" * 7000
    cut = truncate_utf8(text, PERSPECTIVE_MAX_BYTES)
    assert cut == "x" + "中" * 6826
    assert utf8_len(cut) == 20_479
    short = "ab" * 100
    assert truncate_utf8(short, PERSPECTIVE_MAX_BYTES) is short
    exact = "a" * PERSPECTIVE_MAX_BYTES
    assert truncate_utf8(exact, PERSPECTIVE_MAX_BYTES) is exact
    assert truncate_utf8(exact + "b", PERSPECTIVE_MAX_BYTES) == exact


def test_mixed_scripts_prefix() -> None:
    text = "Hello, 世界! नमस्ते 😀 مرحبا" * 50
    for budget in (0, 1, 7, 8, 9, 10, 31, 100, 1000):
        cut = truncate_utf8(text, budget)
        assert text.startswith(cut)
        assert utf8_len(cut) <= budget
        assert utf8_len(text[: len(cut) + 1]) > budget  # the longest such prefix
    with pytest.raises(ValueError):
        truncate_utf8("x", -1)
