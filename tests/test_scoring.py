"""The scorer contract (values or an error, never a made-up 0), the persistent score cache (hits,
transient errors never cached, shared across runs) and a scorer crashing part-way through a run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from polytox import evaluate, registry
from polytox.scoring import CachedScorer, ScoreCache, build_scorer
from polytox.scoring.base import EMPTY_TEXT_ERROR, Scorer
from polytox.scoring.fake import FakeScorer
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import Score

from .core_helpers import eval_args, only_scores_dir, read_json, read_parts, run_cli


class CountingScorer(Scorer):
    """Scores = text length / 100; records every text it was asked to score; fails on 'transient'."""

    name = "counting"
    version = "1"
    calls: ClassVar[list[str]] = []

    def __init__(self, languages: str = "any") -> None:
        self.languages = None if languages == "any" else frozenset(languages.split(","))

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        CountingScorer.calls.extend(texts)
        return [Score.failed("TIMEOUT", transient=True) if "transient" in t else
                Score.failed("COMMENT_TOO_LONG") if "permanent" in t else
                Score(values={"toxicity": min(1.0, len(t) / 100)}) for t in texts]


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingScorer]:
    monkeypatch.setitem(registry.SCORERS, "counting", CountingScorer)  # type: ignore[arg-type]
    CountingScorer.calls = []
    return CountingScorer


# ---- the Score record and the base class --------------------------------------------------------------
def test_score_holds_values_or_an_error() -> None:
    with pytest.raises(ValueError):
        Score()
    with pytest.raises(ValueError):
        Score(values={"toxicity": 0.1}, error="x")
    ok, bad = Score(values={"toxicity": 0.0}), Score.failed("nope")
    assert ok.ok and ok.get("toxicity") == 0.0 and ok.get("insult") is None
    assert not bad.ok and bad.get("toxicity") is None and not bad.transient


def test_base_scorer_turns_unscorable_input_into_errors() -> None:
    scorer = FakeScorer(languages="en")
    out = scorer.score(["hello you idiot", "", "   ", "hallo du", "fine"], ["en", "en", "en", "de", "en"])
    assert out[0].ok and out[4].ok
    assert out[1].error == out[2].error == EMPTY_TEXT_ERROR
    assert out[3].error == "LANGUAGE_NOT_SUPPORTED: unsupported language: de (fake does not score it)"
    assert all(s.get("toxicity") is None for s in out[1:4])  # no made-up 0
    with pytest.raises(ValueError):
        scorer.score(["a"], [])


def test_a_scorer_returning_the_wrong_count_becomes_errors() -> None:
    class Short(FakeScorer):
        def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
            return super().score_batch(texts, langs)[:-1]

    out = Short(batch_size=2).score(["a b", "c d", "e f"], ["en"] * 3)
    assert [s.error for s in out] == [
        "SCORER_CRASHED: RuntimeError: fake returned 1 scores for 2 texts"] * 2 + [
        "SCORER_CRASHED: RuntimeError: fake returned 0 scores for 1 texts"]
    assert all(s.transient for s in out)


def test_fake_scorer_crash_on_loses_only_its_batch() -> None:
    texts = [f"text {i}" for i in range(10)]
    texts[6] = "text with BOOM inside"
    out = FakeScorer(crash_on="BOOM", batch_size=4).score(texts, ["en"] * 10)
    crashed = [i for i, s in enumerate(out) if not s.ok]
    assert crashed == [4, 5, 6, 7]  # the second batch of four
    assert all(out[i].transient and out[i].error.startswith("SCORER_CRASHED") for i in crashed)  # type: ignore[union-attr]


# ---- the cache ----------------------------------------------------------------------------------------
def test_cache_hits_and_keys(tmp_path: Path, counting: type[CountingScorer]) -> None:
    cache = ScoreCache(tmp_path / "c.sqlite")
    scorer = CachedScorer(CountingScorer(), cache)
    first = scorer.score(["a b c", "hello", "hello"], ["en", "en", "de"])
    assert counting.calls == ["a b c", "hello", "hello"]  # (text, lang) is the key: de is another entry
    assert (scorer.hits, scorer.misses) == (0, 3) and len(cache) == 3
    again = scorer.score(["hello", "a b c", "new one"], ["en", "en", "en"])
    assert counting.calls[3:] == ["new one"]
    assert (scorer.hits, scorer.misses) == (2, 4)
    assert again[0] == first[1] and again[1] == first[0]
    # the key holds the scorer's name@version and attributes: another version is another entry
    assert ScoreCache.key("t", "en", "counting@1", ("toxicity",)) != ScoreCache.key("t", "en", "counting@2",
                                                                                     ("toxicity",))
    assert ScoreCache.key("t", "en", "x@1", ("toxicity",)) != ScoreCache.key("t", "en", "x@1",
                                                                             ("toxicity", "insult"))


def test_transient_errors_are_not_cached_permanent_ones_are(tmp_path: Path,
                                                           counting: type[CountingScorer]) -> None:
    cache = ScoreCache(tmp_path / "c.sqlite")
    scorer = CachedScorer(CountingScorer(), cache)
    out = scorer.score(["transient text", "permanent text", "fine text"], ["en"] * 3)
    assert [s.error for s in out] == ["TIMEOUT", "COMMENT_TOO_LONG", None]
    assert len(cache) == 2
    counting.calls.clear()
    again = scorer.score(["transient text", "permanent text", "fine text"], ["en"] * 3)
    assert counting.calls == ["transient text"]  # retried; the other two are hits
    assert again[1] == Score.failed("COMMENT_TOO_LONG") and again[2] == out[2]


def test_cache_is_persistent_and_shared_across_runs(tmp_path: Path, counting: type[CountingScorer]) -> None:
    spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=6),
                    generation=GenerationSpec(model="fake", backend="fake", samples=3),
                    scorer=ScorerSpec(name="counting"), seed=1)
    first = evaluate(spec, tmp_path / "run1")
    n_texts = len(counting.calls)
    assert 0 < n_texts <= 18
    counting.calls.clear()
    second = evaluate(spec, tmp_path / "run2")  # a new run directory, the same cache (POLYTOX_CACHE_DIR)
    assert counting.calls == []
    assert second.metrics["overall"] == first.metrics["overall"]
    assert read_parts(only_scores_dir(tmp_path / "run2")) == read_parts(only_scores_dir(tmp_path / "run1"))
    manifest = read_json(tmp_path / "run1" / "manifest.json")
    assert manifest["scorer"]["cache"].endswith("scores.sqlite")
    # cache=off: the scorer is asked again
    off = EvalSpec(prompts=spec.prompts, generation=spec.generation,
                   scorer=ScorerSpec(name="counting", options=(("cache", "off"),)), seed=1)
    evaluate(off, tmp_path / "run3")
    assert len(counting.calls) == n_texts


def test_build_scorer_options(tmp_path: Path) -> None:
    scorer = build_scorer("fake", {"cache": str(tmp_path / "mine.sqlite"), "attributes": "toxicity,insult"})
    assert isinstance(scorer, CachedScorer) and scorer.cache.path == tmp_path / "mine.sqlite"
    assert scorer.attributes == ("toxicity", "insult") and scorer.id.startswith("fake@")
    assert not isinstance(build_scorer("fake", {"cache": "off"}), CachedScorer)
    with pytest.raises(Exception, match=r"unknown scorer 'fak'\. Did you mean 'fake'"):
        build_scorer("fak")


# ---- a scorer crashing part-way through a run --------------------------------------------------------
def test_scorer_crash_part_way_is_recorded_and_counted(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    # the fake generator writes "idiot" in some continuations; batches holding one crash the scorer
    code, _, err = run_cli(capsys, *eval_args(out, lang="en", limit=12, samples=4, seed=3,
                                              model_opt="toxicity=0.02",
                                              scorer_opt=["crash_on=idiot", "batch_size=5"]))
    # the injected crashes exceed --max-failed (0.5%): exit code 3, the failures summarised, everything stored
    assert code == 3, err
    assert "SCORER_CRASHED" in err and "--retry-failed" in err
    gens = read_parts(out / "generations")
    scores = read_parts(only_scores_dir(out))
    # what the crash must have cost, rebuilt from the stored generations: in the one shard, the non-empty
    # texts go to the scorer in batches of 5, and a batch holding "idiot" is lost as errors
    expected_crashed = set()
    texts = [(g["prompt_id"], g["sample_index"], g["text"]) for g in gens if g["text"] and g["text"].strip()]
    for start in range(0, len(texts), 5):
        batch = texts[start:start + 5]
        if any("idiot" in t for _, _, t in batch):
            expected_crashed |= {(p, k) for p, k, _ in batch}
    crashed = {(s["prompt_id"], s["sample_index"]) for s in scores
               if s["error"] and s["error"].startswith("SCORER_CRASHED")}
    assert crashed == expected_crashed and 0 < len(crashed) < len(scores)
    assert all(s["toxicity"] is None for s in scores if s["error"])
    empty = sum(1 for g in gens if not (g["text"] or "").strip())
    metrics = read_json(out / "metrics.json")["overall"]
    assert metrics["n_missing_scores"] == len(crashed) + empty
    assert metrics["n_generations"] == 48
    # crashed scores were not cached: a second run without the crash scores them
    code, _, err = run_cli(capsys, *eval_args(tmp_path / "run2", lang="en", limit=12, samples=4, seed=3,
                                              model_opt="toxicity=0.02", scorer_opt="batch_size=5"))
    assert code == 0, err
    assert read_json(tmp_path / "run2" / "metrics.json")["overall"]["n_missing_scores"] == empty
