"""Attention pooling over token states (``scoring/ml/attention.py``): the token states the embedder
hands out, the probe's reduction to the mean-pool ridge, and what it learns where a mean pool dilutes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .tiny_models import make_tiny_lm

    return make_tiny_lm(tmp_path_factory.mktemp("gemma3"), arch="gemma3")


def test_token_states_average_to_the_mean_pools(tiny_backbone: Path) -> None:
    from polytox.scoring.ml.attention import mean_pools
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    texts = ["you are such an idiot", "shut up", "the weather this morning was cold and grey", ""]
    emb = HiddenStateEmbedder(str(tiny_backbone), (1, 2), batch_size=3)
    states, offsets = emb.token_states(texts)
    assert states.dtype == np.float16 and states.shape[1] == 64 and offsets[0] == 0 and offsets[-1] == len(states)
    lengths = np.diff(offsets)
    assert lengths[1] < lengths[0] < lengths[2]  # one row per token the pool reads, in each text's order
    np.testing.assert_allclose(mean_pools(states, offsets), emb.embed(texts), rtol=5e-3, atol=5e-3)
    assert emb.token_states([])[0].shape == (0, 64)


def test_mean_pools_and_take_handle_empty_texts() -> None:
    from polytox.scoring.ml.attention import mean_pools
    from polytox.scoring.ml.attention_trial import _take

    states = np.arange(12, dtype=np.float16).reshape(6, 2)
    offsets = np.array([0, 2, 2, 6])
    np.testing.assert_allclose(mean_pools(states, offsets), [[1, 2], [0, 0], [7, 8]])
    sub_states, sub_offsets = _take(states, offsets, np.array([2, 0]))
    np.testing.assert_array_equal(sub_offsets, [0, 4, 6])
    np.testing.assert_array_equal(sub_states, states[[2, 3, 4, 5, 0, 1]])


def _bags(rng: np.random.Generator, n: int, dims: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Texts of 5-40 noise tokens; a toxic text hides one token far along the first axis."""
    lengths = rng.integers(5, 41, size=n)
    toxic = rng.random(n) < 0.3
    chunks = []
    for length, bad in zip(lengths, toxic, strict=True):
        tokens = rng.normal(0, 1, size=(length, dims))
        if bad:
            tokens[rng.integers(length), 0] += 6.0
        chunks.append(tokens)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return np.concatenate(chunks).astype(np.float16), offsets, toxic


def test_probe_reduces_to_the_ridge_and_finds_the_one_toxic_token() -> None:
    from sklearn.metrics import roc_auc_score

    from polytox.scoring.ml.attention import fit_attention_probe, fit_ridge, mean_pools

    rng = np.random.default_rng(0)
    states, offsets, toxic = _bags(rng, 600)
    test_states, test_offsets, test_toxic = _bags(rng, 400)
    target = toxic.astype(float)
    # an attention query penalised to nothing: the probe is the mean-pool ridge
    frozen = fit_attention_probe(states, offsets, target, alpha_w=10.0, alpha_v=1e9)
    assert np.abs(frozen.v).max() < 1e-4
    pools = mean_pools(states, offsets)
    coef, intercept = fit_ridge((pools - frozen.mean) / frozen.scale, target, 10.0)
    ridge = ((mean_pools(test_states, test_offsets) - frozen.mean) / frozen.scale) @ coef + intercept
    np.testing.assert_allclose(frozen.score(test_states, test_offsets), ridge, atol=2e-3)
    # free to attend: it finds the token a mean pool dilutes by the text's length
    probe = fit_attention_probe(states, offsets, target, alpha_w=10.0, alpha_v=1.0)
    mean_auc = roc_auc_score(test_toxic, ridge)
    attention_auc = roc_auc_score(test_toxic, probe.score(test_states, test_offsets))
    assert attention_auc > 0.97 and attention_auc > mean_auc + 0.05
    assert abs(probe.v[0]) == np.abs(probe.v).max()  # it looks along the toxic axis
