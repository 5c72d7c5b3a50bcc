"""Lexicon scorer: word boundaries in spaced scripts, substrings in zh/ja, count/rate/any, RTP C.2 counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polytox.errors import PolytoxError
from polytox.scoring import build_scorer
from polytox.scoring.lexicon import LexiconScorer, appendix_c2


@pytest.fixture
def lists(tmp_path: Path) -> Path:
    d = tmp_path / "lists"
    d.mkdir()
    (d / "en.txt").write_text("ass\nbad word\n2 girls 1 cup\n# a comment\n\n", encoding="utf-8")
    (d / "hi.txt").write_text("कुत\n", encoding="utf-8")
    (d / "zh.txt").write_text("王八蛋\n", encoding="utf-8")
    (d / "ja.txt").write_text("sm\nばか\n", encoding="utf-8")
    (d / "README.md").write_text("not a list", encoding="utf-8")
    return d


def test_word_boundaries_in_spaced_scripts(lists: Path) -> None:
    s = LexiconScorer(dir=str(lists))
    assert s.score_text("Classic assessment of a bass", "en")["profanity_count"] == 0
    v = s.score_text("You ASS, what an ass! A bad   word, 2 girls\n1 cup.", "en")
    assert v["profanity_count"] == 4  # case-folded, whitespace inside terms is flexible
    assert v["profanity_rate"] == pytest.approx(4 / 12)
    assert v["profanity_any"] == 1.0 and v["toxicity"] == 1.0
    # A Devanagari vowel sign (a combining mark) continues the word: no match inside a longer word.
    assert s.score_text("वह कुत्ता है", "hi")["profanity_count"] == 0
    assert s.score_text("वह कुत है", "hi")["profanity_count"] == 1


def test_substrings_for_zh_and_ja_but_not_for_latin_terms_there(lists: Path) -> None:
    s = LexiconScorer(dir=str(lists))
    zh = s.score_text("他是王八蛋啊", "zh")
    assert zh["profanity_count"] == 1 and zh["profanity_rate"] == pytest.approx(1 / 6)
    assert s.score_text("お前はばかだ", "ja")["profanity_count"] == 1
    assert s.score_text("smsを送った", "ja")["profanity_count"] == 0  # "sm" needs word boundaries
    assert s.score_text("SMの話", "ja")["profanity_count"] == 1
    assert s.score_text("ｓｍ", "ja")["profanity_count"] == 1  # full-width folds to ASCII (NFKC)


def test_clean_text_scores_zero_not_missing_and_unsupported_language_is_an_error(lists: Path) -> None:
    s = LexiconScorer(dir=str(lists), toxicity="rate")
    ok, unsupported, empty = s.score(["a fine day", "bonjour", "  "], ["en", "fr", "en"])
    assert ok.values is not None and ok.values["toxicity"] == 0.0 and ok.values["profanity_count"] == 0.0
    assert unsupported.error is not None and unsupported.error.startswith("LANGUAGE_NOT_SUPPORTED")
    assert empty.error is not None and empty.error.startswith("EMPTY_TEXT")
    assert s.languages == frozenset({"en", "hi", "zh", "ja"})


def test_identity_mentions_of_rtp_appendix_c2(lists: Path) -> None:
    s = LexiconScorer(dir=str(lists), lists="profanity,identity")
    v = s.score_text("A gay man and a white woman; black coffee", "en")
    assert (v["minority_count"], v["majority_count"]) == (3.0, 2.0)  # gay, woman, black / man, white
    assert "minority_count" not in s.score_text("王八蛋", "zh")  # English words: null elsewhere, never 0
    assert "minority_any" in s.attributes


def test_version_follows_the_lists(lists: Path) -> None:
    before = LexiconScorer(dir=str(lists)).version
    (lists / "en.txt").write_text("ass\nnewword\n", encoding="utf-8")
    assert LexiconScorer(dir=str(lists)).version != before


def test_bad_configuration_is_explained(tmp_path: Path, lists: Path) -> None:
    with pytest.raises(PolytoxError, match="dir=PATH"):
        LexiconScorer()
    with pytest.raises(PolytoxError, match="not a folder"):
        LexiconScorer(dir=str(tmp_path / "nope"))
    (lists / "de.txt").write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(PolytoxError, match=r"de.txt:2: invalid UTF-8"):
        LexiconScorer(dir=str(lists))
    with pytest.raises(PolytoxError, match="has no option 'lsts'"):
        build_scorer("lexicon", {"dir": str(lists), "lsts": "x"})


def test_ldnoobw_lists_cover_17_languages(shared_data: Path) -> None:
    s = LexiconScorer(dir=str(shared_data / "ldnoobw"))
    assert len(s.languages or ()) == 17
    assert s.score_text("What the fuck is this shit", "en")["profanity_count"] == 2
    assert s.score_text("他是个王八蛋", "zh")["profanity_any"] == 1.0


def test_appendix_c2_on_real_rtp_prompts(shared_data: Path) -> None:
    """RTP C.2: prompt toxicity correlates with profanity; profanity in prompts carries into continuations."""
    prompts, conts, tox = [], [], []
    for name in ("toxic", "nontoxic"):
        for line in (shared_data / "rtp" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            prompts.append(rec["prompt"]["text"])
            conts.append(rec["continuation"]["text"])
            tox.append(rec["prompt"]["toxicity"])
    s = LexiconScorer(dir=str(shared_data / "ldnoobw"), lists="profanity,identity")
    out = appendix_c2(s, prompts, conts, tox)
    assert out["prompt_toxicity~prompt_profanity"]["n"] == sum(t is not None for t in tox)
    r_tox = out["prompt_toxicity~prompt_profanity"]["r"]
    r_prop = out["prompt_profanity~continuation_profanity"]["r"]
    assert r_tox is not None and r_tox > 0.43  # paper, all RTP prompts: 0.43; this half-toxic subset: higher
    assert r_prop is not None and 0.1 < r_prop < 0.5 and (out["prompt_profanity~continuation_profanity"]["p"]
                                                          or 1) < 1e-6
