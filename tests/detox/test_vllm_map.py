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


def test_embedded_word_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without list=, the filter reads the glin-profanity wheel's English list (LDNOOBW-derived)."""
    pytest.importorskip("glin_profanity")
    from polytox.detox.wordlists import read_list

    monkeypatch.delenv("POLYTOX_LEXICON_DIR", raising=False)
    en = read_list("glin-profanity:en")
    assert len(en) > 300 and {"asshole", "bastard", "blue waffle"} <= set(en)
    assert en == sorted({t.casefold() for t in en})
    kw = sampling_kwargs(GenerationSpec(backend="vllm", detox="word-filter"), 2, 7)
    assert {"asshole", "Asshole"} <= set(kw["bad_words"]) and len(kw["bad_words"]) > len(en)
    de = read_list("glin-profanity:de")
    assert de == read_list("glin-profanity:german") and not set(de) <= set(en)
    with pytest.raises(PolytoxError, match="no list for 'id'"):
        read_list("glin-profanity:id")
    with pytest.raises(PolytoxError, match="no word list at"):
        read_list("/nonexistent/list.txt")
