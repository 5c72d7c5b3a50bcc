"""``polytox.score`` keeps its scorer loaded between calls; ``polytox.scorer`` gives a handle that owns one.

The scorer is ``hf`` on a tiny random BERT built in the test, so a build really loads a checkpoint
(``load_sequence_classifier``, counted here) and every call with new texts really runs the model
(``cache=off``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import polytox
from polytox.api import scorers as api_scorers
from polytox.scoring import hf_classifier

from .tiny_hf import SENTENCES, bert_classifier, one_torch_thread

WORDS = ["you", "idiot", "the", "park", "lovely", "day", "stupid", "friend", "rain", "walk"]


def new_texts(n: int, seed: int) -> list[str]:
    """``n`` texts no earlier call has seen (so nothing could come from a cache)."""
    return [f"{WORDS[(seed + i) % len(WORDS)]} {WORDS[(seed * 7 + i) % len(WORDS)]} {seed}-{i}" for i in range(n)]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    polytox.close_scorers()
    with one_torch_thread():
        yield
    polytox.close_scorers()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every checkpoint load, by path."""
    seen: list[str] = []
    real = hf_classifier.load_sequence_classifier

    def counting(model: str, **kw: Any) -> Any:
        seen.append(model)
        return real(model, **kw)

    monkeypatch.setattr(hf_classifier, "load_sequence_classifier", counting)
    return seen


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bert_classifier(tmp_path_factory.mktemp("tiny") / "m", {0: "neutral", 1: "toxic"})


def options(model: Path, **extra: str) -> dict[str, str]:
    return {"model": str(model), "device": "cpu", "dtype": "float32", "cache": "off", **extra}


def test_a_second_call_with_new_texts_reuses_the_loaded_scorer(model: Path, loads: list[str]) -> None:
    opts = options(model)
    first = polytox.score(SENTENCES, scorer="hf", langs="en", options=opts)
    assert loads == [str(model)] and all(r.ok for r in first)
    texts = new_texts(64, 1)
    start = time.perf_counter()
    second = polytox.score(texts, scorer="hf", langs="en", options=[f"{k}={v}" for k, v in opts.items()])
    call_s = time.perf_counter() - start
    assert loads == [str(model)], "the second call loaded the checkpoint again"
    assert all(r.ok for r in second) and len({r.value for r in second}) > 1
    # The same work on the kept scorer object itself: the call may add at most 0.1 s to it.
    (kept,) = api_scorers._SHARED.values()
    other = new_texts(64, 2)
    start = time.perf_counter()
    kept.score(other, ["en"] * len(other))
    scoring_s = time.perf_counter() - start
    assert call_s <= scoring_s + 0.1, (call_s, scoring_s)
    # And the values are those of a scorer built afresh for the same texts.
    with polytox.scorer("hf", opts) as fresh:
        assert [r.value for r in fresh.score(texts, "en")] == [r.value for r in second]
    assert polytox.loaded_scorers() == [second[0].scorer]


def test_other_options_build_another_scorer_and_close_releases_them(model: Path, loads: list[str]) -> None:
    polytox.score(["a b"], scorer="hf", langs="en", options=options(model))
    polytox.score(["c d"], scorer="hf", langs="en", options=options(model, max_length="16"))
    polytox.score(["e f"], scorer="hf", langs="en", options=options(model))
    assert len(loads) == 2 and len(polytox.loaded_scorers()) == 2
    polytox.close_scorers()
    assert polytox.loaded_scorers() == []
    polytox.score(["g h"], scorer="hf", langs="en", options=options(model))
    assert len(loads) == 3


def test_threads_share_one_build_and_get_single_thread_values(model: Path, loads: list[str]) -> None:
    texts = [new_texts(16, seed) for seed in range(8)]
    results: dict[int, list[float | None]] = {}
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        barrier.wait()
        results[i] = [r.value for r in polytox.score(texts[i], scorer="hf", langs="en", options=options(model))]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and sorted(results) == list(range(8))
    polytox.close_scorers()
    for i in range(8):
        alone = [r.value for r in polytox.score(texts[i], scorer="hf", langs="en", options=options(model))]
        assert alone == results[i]


def test_the_handle_owns_its_scorer(model: Path, loads: list[str]) -> None:
    with polytox.scorer("hf", options(model)) as s:
        assert s.id.startswith("hf@") and loads == [str(model)]
        a = s.score(new_texts(5, 3), "en")
        b = s.score(["", *new_texts(5, 4)], "en")
        assert len(loads) == 1 and all(r.ok for r in a) and b[0].error.startswith("EMPTY_TEXT")
    assert polytox.loaded_scorers() == []  # the handle did not fill polytox.score's scorers
    with pytest.raises(polytox.PolytoxError, match="closed"):
        s.score(["again"], "en")


def test_a_bad_scorer_raises_and_keeps_nothing() -> None:
    with pytest.raises(polytox.PolytoxError, match="nosuch"):
        polytox.score(["a"], scorer="nosuch")
    with pytest.raises(polytox.PolytoxError, match="nosuch"):
        polytox.scorer("nosuch")
    with pytest.raises(polytox.PolytoxError):
        polytox.score(["a", "b"], scorer="fake", langs=["en"])
    assert polytox.loaded_scorers() == []
