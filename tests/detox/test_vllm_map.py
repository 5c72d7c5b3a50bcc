"""The word filter maps to vLLM's ``bad_words``; other methods are refused on vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from polytox.errors import PolytoxError
from polytox.generation.vllm_backend import sampling_kwargs
from polytox.spec import GenerationSpec


def test_word_filter_becomes_bad_words(tmp_path: Path) -> None:
    words = tmp_path / "w.txt"
    words.write_text("# comment\nIdiot\nblue waffle\n")
    kw = sampling_kwargs(GenerationSpec(backend="vllm", detox=f"word-filter:list={words}"), 2, 7)
    assert kw["bad_words"] == ["Blue waffle", "Idiot", "blue waffle", "idiot"]
    assert "bad_words" not in sampling_kwargs(GenerationSpec(backend="vllm"), 2, 7)
    with pytest.raises(PolytoxError, match="transformers backend only"):
        sampling_kwargs(GenerationSpec(backend="vllm", detox="vocab-shift:path=x"), 2, 7)
