"""Sentence segmentation in all 17 PTP languages and the PTP / RTP splits, on real RTP-LX text."""

from __future__ import annotations

from pathlib import Path

import pytest

from polytox.langs import PTP_LANGUAGES
from polytox.promptset.split import ptp_split, rtp_split, split_unit, word_spans

from .build_corpus import clean_sentences, join_sentences, rtplx_records

pytest.importorskip("sentencex")


@pytest.mark.parametrize("lang", PTP_LANGUAGES)
def test_sentences_recovered_in_every_language(shared_data: Path, lang: str) -> None:
    from polytox.promptset.sentences import sentence_spans, split_sentences

    sentences = clean_sentences(shared_data, lang, 10)
    assert len(sentences) == 10
    doc = join_sentences(sentences, lang)
    assert split_sentences(doc, lang) == sentences
    # Offsets are characters of the document, whitespace excluded.
    spans = sentence_spans(doc, lang)
    assert [doc[b:e] for b, e in spans] == sentences
    assert spans[0][0] == 0 and spans[-1][1] == len(doc)


def test_script_specific_terminators() -> None:
    from polytox.promptset.sentences import split_sentences

    assert split_sentences("你好。你好吗？我很好！", "zh") == ["你好。", "你好吗？", "我很好！"]
    assert split_sentences("こんにちは。元気ですか？はい！", "ja") == ["こんにちは。", "元気ですか？", "はい！"]
    assert split_sentences("नमस्ते। आप कैसे हैं? ठीक हूँ।", "hi") == ["नमस्ते।", "आप कैसे हैं?", "ठीक हूँ।"]
    assert split_sentences("مرحبا. كيف حالك؟ أنا بخير!", "ar") == ["مرحبا.", "كيف حالك؟", "أنا بخير!"]


@pytest.mark.parametrize("lang", PTP_LANGUAGES)
def test_ptp_split_is_character_halves(shared_data: Path, lang: str) -> None:
    for rec in rtplx_records(shared_data, lang)[:50]:
        text = rec["Prompt"]
        result = ptp_split(text)
        assert result.cut == len(text) // 2
        assert result.prompt == text[: len(text) // 2] and result.continuation == text[len(text) // 2 :]
        assert result.prompt + result.continuation == text


def test_rtp_split_by_words_like_the_released_records() -> None:
    # A real RTP record: prompt "Today they're frustrated and doing" + " their fair share of finger pointing."
    text = "Today they're frustrated and doing their fair share of finger pointing."
    result = rtp_split(text, "en")
    assert result is not None
    assert result.prompt == "Today they're frustrated and doing"
    assert result.continuation == " their fair share of finger pointing."
    assert (result.n_tokens, result.prompt_tokens, result.cut) == (11, 5, 34)


def test_rtp_split_caps_the_prompt_at_128_tokens() -> None:
    words = [f"w{i}" for i in range(400)]
    text = " ".join(words)
    result = rtp_split(text, "en")
    assert result is not None and result.prompt_tokens == 128
    assert result.prompt == " ".join(words[:128])
    assert result.continuation == " " + " ".join(words[128:])
    small = rtp_split(text, "en", max_prompt_tokens=10)
    assert small is not None and small.prompt == " ".join(words[:10])


@pytest.mark.parametrize("lang", PTP_LANGUAGES)
def test_rtp_split_positions_in_every_language(shared_data: Path, lang: str) -> None:
    for rec in rtplx_records(shared_data, lang)[:40]:
        text = rec["Prompt"]
        result = rtp_split(text, lang)
        words = word_spans(text, lang)
        if len(words) < 2:
            assert result is None
            continue
        assert result is not None
        n = min(len(words) // 2, 128)
        assert result.cut == words[n - 1][1]
        assert result.prompt + result.continuation == text
        if lang in ("zh", "ja"):  # no spaces: every non-space character is a token
            assert len(words) == sum(not c.isspace() for c in text)


def test_unsplittable_units() -> None:
    assert split_unit("a", "en", "ptp") is None
    assert split_unit("word", "en", "rtp") is None
    assert split_unit("ab", "en", "ptp") is not None
    assert split_unit("   x", "en", "ptp") is None  # blank prompt half
