"""Attention pooling over token states (``scoring/ml/attention.py``): the token states the embedder
hands out, the probe's reduction to the mean-pool ridge, and what it learns where a mean pool dilutes."""

from __future__ import annotations

import io
import json
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
    from polytox.training.scorer.attention_fit import take

    states = np.arange(12, dtype=np.float16).reshape(6, 2)
    offsets = np.array([0, 2, 2, 6])
    np.testing.assert_allclose(mean_pools(states, offsets), [[1, 2], [0, 0], [7, 8]])
    sub_states, sub_offsets = take(states, offsets, np.array([2, 0]))
    np.testing.assert_array_equal(sub_offsets, [0, 4, 6])
    np.testing.assert_array_equal(sub_states, states[[2, 3, 4, 5, 0, 1]])


def test_standardised_states_are_one_new_array_with_the_out_of_place_values() -> None:
    """The probe fit standardises its token states in place on one copy: the same bits as
    ``(x - mean) / scale``, and the caller's array is never written, whatever its dtype."""
    import torch

    from polytox.scoring.ml.attention import _standardised

    rng = np.random.default_rng(0)
    mean, scale = rng.normal(size=16), rng.uniform(0.5, 2.0, size=16)
    for stored in (np.float16, np.float32, np.float64):
        states = rng.normal(size=(300, 16)).astype(stored)
        kept = states.copy()
        for dtype in ("float32", "float64"):
            x = torch.from_numpy(np.asarray(states, dtype=dtype))
            expected = (x - torch.from_numpy(np.asarray(mean, dtype=dtype))) / torch.from_numpy(
                np.asarray(scale, dtype=dtype))
            got = _standardised(states, mean, scale, dtype)
            assert torch.equal(got, expected) and got.dtype == getattr(torch, dtype)
        np.testing.assert_array_equal(states, kept)


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


def _random_probe(rng: np.random.Generator, dims: int) -> object:
    from polytox.scoring.ml.attention import AttentionProbe

    return AttentionProbe(mean=rng.normal(0, 0.5, dims).astype(np.float32),
                          scale=rng.uniform(0.5, 2.0, dims).astype(np.float32),
                          v=rng.normal(0, 0.5, dims).astype(np.float32), w=rng.normal(0, 0.2, dims).astype(np.float32),
                          b=0.25)


def test_probe_scores_in_the_forward_pass_match_the_token_states_and_are_cached(tiny_backbone: Path,
                                                                                 tmp_path: Path) -> None:
    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    rng = np.random.default_rng(1)
    probes = [_random_probe(rng, 64), _random_probe(rng, 64)]
    texts = ["you are such an idiot", "shut up", "the weather this morning was cold and grey", "shut up", "ok"]
    plain = HiddenStateEmbedder(str(tiny_backbone), (1, 2), batch_size=2)
    states, offsets = plain.token_states(texts)
    pools, scores = plain.embed_and_probe(texts, probes)  # type: ignore[arg-type]
    assert scores.shape == (5, 2)
    np.testing.assert_array_equal(pools, plain.embed(texts))  # the probes change nothing in the pools
    for k, probe in enumerate(probes):  # the hook path computes what the probe reads from the token states
        np.testing.assert_allclose(scores[:, k], probe.score(states, offsets), rtol=1e-2, atol=1e-2)  # type: ignore[attr-defined]
    assert scores[1, 0] == scores[3, 0] and abs(scores[0, 0] - scores[1, 0]) > 1e-3
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    first = HiddenStateEmbedder(str(tiny_backbone), (1, 2), cache=cache)
    _, cached = first.embed_and_probe(texts, probes)  # type: ignore[arg-type]
    assert first.computed == 4  # distinct texts
    again = HiddenStateEmbedder(str(tiny_backbone), (1, 2), cache=cache)
    _, served = again.embed_and_probe(texts, probes)  # type: ignore[arg-type]
    assert again.computed == 0
    np.testing.assert_array_equal(served, cached)
    other = _random_probe(rng, 64)
    _, fresh = again.embed_and_probe(texts, [other])  # type: ignore[list-item]
    assert again.computed == 4  # a probe with other numbers is a cache miss
    np.testing.assert_allclose(fresh[:, 0], other.score(states, offsets), rtol=1e-2, atol=1e-2)  # type: ignore[attr-defined]


def test_empty_text_scores_as_the_ridge_on_a_zero_pool() -> None:
    from polytox.scoring.ml.attention import AttentionProbe

    rng = np.random.default_rng(2)
    probe = _random_probe(rng, 4)
    assert isinstance(probe, AttentionProbe)
    states = rng.normal(size=(3, 4)).astype(np.float16)
    scores = probe.score(states, np.array([0, 3, 3]))
    assert np.isfinite(scores).all()
    assert scores[1] == pytest.approx(float((-probe.mean / probe.scale) @ probe.w + probe.b))
    torch = pytest.importorskip("torch")
    hidden = torch.from_numpy(np.stack([states.astype(np.float32), states.astype(np.float32)]))
    keep = torch.tensor([[True, True, True], [False, False, False]])
    batch = probe.token_scores([hidden], keep).numpy()
    assert batch[0] == pytest.approx(scores[0], rel=1e-4) and batch[1] == pytest.approx(scores[1], rel=1e-5)


def test_head_keeps_its_probe_and_its_fourth_combiner_weight(tmp_path: Path) -> None:
    from polytox.errors import PolytoxError
    from polytox.scoring.ml.head import MlHead
    from polytox.scoring.ml.ngrams import NgramConfig

    rng = np.random.default_rng(3)
    probe = _random_probe(rng, 6)
    head = MlHead(ngram=NgramConfig(n_features=16), idf=np.ones(16, dtype=np.float32),
                  w_ngram=np.zeros(16, dtype=np.float32), b_ngram=0.0,
                  combine={"full": (0.1, 1.0, 2.0), "full:other": (-0.5, 1.0, 0.5, 3.0)}, backbone="x", layers=(1,),
                  emb_mean=np.zeros(6, dtype=np.float32), emb_scale=np.ones(6, dtype=np.float32),
                  w_emb=np.ones(6, dtype=np.float32), probe=probe)  # type: ignore[arg-type]
    head.save(tmp_path / "h.npz")
    loaded = MlHead.load(tmp_path / "h.npz")
    assert loaded.probe is not None and loaded.probe.digest == probe.digest  # type: ignore[attr-defined]
    assert loaded.combine["full:other"] == (-0.5, 1.0, 0.5, 3.0)
    ngram, emb, probe_out = np.array([0.2, 0.2]), np.array([0.1, 0.1]), np.array([0.0, 1.0])
    langs = ["de", "de"]
    p = loaded.raw_probability(ngram, emb, "full", langs, probe_out)
    np.testing.assert_allclose(np.log(p / (1 - p)), [-0.5 + 0.2 + 0.05, -0.5 + 0.2 + 0.05 + 3.0])
    english = loaded.raw_probability(ngram, emb, "full", ["en", "en"])  # English never reads the probe
    np.testing.assert_allclose(np.log(english / (1 - english)), [0.1 + 0.2 + 0.2] * 2)
    with pytest.raises(PolytoxError, match="combiner 'full:other' reads the attention probe"):
        loaded.raw_probability(ngram, emb, "full", langs)
    # which batches need the probe at all: the ones with a row whose combiner has its weight
    [(read, rows)] = loaded.row_probes("full", ["en", "de"])
    assert read.digest == probe.digest and rows.tolist() == [False, True]
    assert loaded.row_probes("full", ["en", "en"]) == []
    with np.load(io.BytesIO((tmp_path / "h.npz").read_bytes())) as data:
        assert json.loads(bytes(data["header"]).decode())["format"] == 3
    head.probe = None
    head.combine = {"full": (0.1, 1.0, 2.0)}
    head.save(tmp_path / "plain.npz")  # a head without a probe is still written as format 2
    with np.load(io.BytesIO((tmp_path / "plain.npz").read_bytes())) as data:
        assert json.loads(bytes(data["header"]).decode())["format"] == 2
        assert not any(name.startswith("probe_") for name in data.files)


def test_english_texts_read_the_english_probe_and_the_others_theirs(tmp_path: Path) -> None:
    """Format 4: an English probe beside the non-English one. Each row's combiner reads its own probe's
    score (``row_probes`` / ``probe_inputs``), and a head that reads a probe it lacks is an error."""
    from polytox.errors import PolytoxError
    from polytox.scoring.ml.head import MlHead
    from polytox.scoring.ml.ngrams import NgramConfig

    rng = np.random.default_rng(4)
    probe, probe_en = _random_probe(rng, 6), _random_probe(rng, 6)
    head = MlHead(ngram=NgramConfig(n_features=16), idf=np.ones(16, dtype=np.float32),
                  w_ngram=np.zeros(16, dtype=np.float32), b_ngram=0.0,
                  combine={"full": (0.1, 1.0, 2.0, -4.0), "full:other": (-0.5, 1.0, 0.5, 3.0)}, backbone="x",
                  layers=(1,), emb_mean=np.zeros(6, dtype=np.float32), emb_scale=np.ones(6, dtype=np.float32),
                  w_emb=np.ones(6, dtype=np.float32), probe=probe, probe_en=probe_en)  # type: ignore[arg-type]
    head.save(tmp_path / "h.npz")
    loaded = MlHead.load(tmp_path / "h.npz")
    with np.load(io.BytesIO((tmp_path / "h.npz").read_bytes())) as data:
        assert json.loads(bytes(data["header"]).decode())["format"] == 4
    assert loaded.probe_en is not None and loaded.probe_en.digest == probe_en.digest  # type: ignore[attr-defined]
    assert loaded.probe is not None and loaded.probe.digest == probe.digest  # type: ignore[attr-defined]
    langs = ["en", "de", "en"]
    read = loaded.row_probes("full", langs)
    assert [(p.digest, rows.tolist()) for p, rows in read] == [(probe_en.digest, [True, False, True]),  # type: ignore[attr-defined]
                                                                (probe.digest, [False, True, False])]  # type: ignore[attr-defined]
    scores = np.array([[0.5, 2.0], [0.6, 0.3], [0.7, 2.2]])  # (rows, probes in row_probes' order)
    inputs = loaded.probe_inputs(read, scores)
    assert inputs is not None and inputs.tolist() == [0.5, 0.3, 0.7]
    ngram, emb = np.full(3, 0.2), np.full(3, 0.1)
    p = loaded.raw_probability(ngram, emb, "full", langs, inputs)
    np.testing.assert_allclose(np.log(p / (1 - p)), [0.1 + 0.2 + 0.2 - 2.0, -0.5 + 0.2 + 0.05 + 0.9,
                                                     0.1 + 0.2 + 0.2 - 2.8])
    assert [p.digest for p, _ in loaded.row_probes("full", ["en"])] == [probe_en.digest]  # type: ignore[attr-defined]
    loaded.combine["ngram"] = (0.1, 1.0, 0.0)  # a mode whose combiner reads no probe
    assert loaded.row_probes("ngram", langs) == [] and loaded.probe_inputs(loaded.row_probes("ngram", langs),
                                                                           scores) is None
    loaded.probe_en = None
    with pytest.raises(PolytoxError, match="combiner 'full' reads an attention probe this head does not have"):
        loaded.row_probes("full", langs)


def test_english_probe_fit_rows_are_the_english_training_rows_of_its_tasks() -> None:
    from polytox.training.scorer.attention_fit import english_fit_rows
    from polytox.training.scorer.data import Example
    from polytox.training.scorer.train import task_of, task_weight

    def ex(lang: str, source: str, domain: str, kind: str = "prompt") -> Example:
        return Example(text=source, lang=lang, target=0.5, label=False, source=source, group=source, kind=kind,
                       domain=domain)

    examples = [ex("en", "rtp", "perspective"), ex("en", "ia024-gpt2", "perspective", "generation"),
                ex("en", "toxichat", "human"), ex("de", "rtp-lx", "rtp-lx"), ex("en", "destein-toxic", "perspective"),
                ex("en", "rtp", "perspective")]
    train_rows = np.array([0, 1, 2, 3, 4])  # row 5 is held out
    rows, weight = english_fit_rows(examples, train_rows, ("persp-2020", "persp-2022"), task_weight, task_of)
    assert rows.tolist() == [0, 1] and weight.tolist() == [1.0, 3.0]  # model generations weigh 3 (TASK_WEIGHTS)
    rows, weight = english_fit_rows(examples, train_rows, None, task_weight, task_of)
    assert rows.tolist() == [0, 1, 2, 4] and weight.tolist() == [1.0, 3.0, 0.25, 0.5]


def test_probe_fit_rows_are_rtplx_and_optionally_the_non_english_human_rows() -> None:
    from polytox.training.scorer.attention_fit import fit_row_groups
    from polytox.training.scorer.data import Example

    def ex(source: str, lang: str, domain: str) -> Example:
        return Example(text=f"{source} {lang}", lang=lang, target=0.5, label=True, source=source, group=f"{source}:1",
                       domain=domain)

    examples = [ex("rtp-lx", "de", "rtp-lx"), ex("rtp-lx", "en", "rtp-lx"), ex("cold", "zh", "human"),
                ex("toxichat", "en", "human"), ex("quark", "en", "perspective"), ex("told-br", "pt", "human"),
                ex("rtp-lx", "fr", "rtp-lx")]
    train_rows = np.array([0, 1, 2, 3, 4, 5])  # row 6 is held out
    alone = fit_row_groups(examples, train_rows, None)
    assert len(alone) == 1 and alone[0][1] == 1.0 and alone[0][0].tolist() == [0, 1]
    both = fit_row_groups(examples, train_rows, 0.3)
    assert [(g.tolist(), w) for g, w in both] == [([0, 1], 1.0), ([2, 5], 0.3)]  # English human rows stay out


def test_group_states_join_cached_groups_as_one_pass_would(tiny_backbone: Path, tmp_path: Path) -> None:
    from polytox.scoring.ml.embedder import HiddenStateEmbedder
    from polytox.training.scorer.attention_fit import group_states
    from polytox.training.scorer.data import Example

    texts = ["you are such an idiot", "shut up", "the weather this morning was cold and grey", "ok then"]
    examples = [Example(text=t, lang="de", target=0.5, label=True, source="s", group=f"s:{i}")
                for i, t in enumerate(texts)]
    emb = HiddenStateEmbedder(str(tiny_backbone), (1, 2))
    groups = [(np.array([2, 0]), 1.0), (np.array([3]), 0.3)]
    rows, weights, states, offsets = group_states(emb, examples, groups, tmp_path)
    assert rows.tolist() == [2, 0, 3] and weights.tolist() == [1.0, 1.0, 0.3]
    one_states, one_offsets = emb.token_states([texts[i] for i in rows])
    np.testing.assert_array_equal(offsets, one_offsets)
    np.testing.assert_allclose(states.astype(np.float32), one_states.astype(np.float32), atol=2e-3)
    assert len(list((tmp_path / "token-states").glob("*.npz"))) == 2  # one cache file per group
    again = group_states(emb, examples, groups, tmp_path)  # served from the files: the same arrays
    np.testing.assert_array_equal(again[2], states)


def test_non_english_fit_weighs_rows_only_with_a_human_weight(tiny_backbone: Path, tmp_path: Path) -> None:
    """The non-English probe's fit rows as fit_attention and probe_stability read them: RTP-LX rows, then the
    non-English human rows at their weight; without a human weight, RTP-LX alone and no weights at all."""
    from polytox.scoring.ml.embedder import HiddenStateEmbedder
    from polytox.training.scorer.attention_fit import group_states, non_english_fit
    from polytox.training.scorer.data import Example

    specs = [("rtp-lx", "de", "rtp-lx", "du bist dumm"), ("cold", "zh", "human", "ok"),
             ("toxichat", "en", "human", "shut up"), ("rtp-lx", "fr", "rtp-lx", "il fait froid ce matin")]
    examples = [Example(text=t, lang=lang, target=0.5, label=True, source=src, group=f"{src}:{i}", domain=dom)
                for i, (src, lang, dom, t) in enumerate(specs)]
    emb = HiddenStateEmbedder(str(tiny_backbone), (1, 2))
    rows, weight, states, offsets = non_english_fit(emb, examples, np.arange(4), 0.3, tmp_path)
    assert rows.tolist() == [0, 3, 1] and weight is not None and weight.tolist() == [1.0, 1.0, 0.3]
    alone_rows, alone_weight, alone_states, _ = non_english_fit(emb, examples, np.arange(4), None, tmp_path)
    assert alone_rows.tolist() == [0, 3] and alone_weight is None
    expected = group_states(emb, examples, [(np.array([0, 3]), 1.0), (np.array([1]), 0.3)], tmp_path)
    np.testing.assert_array_equal(states, expected[2])
    np.testing.assert_array_equal(offsets, expected[3])
    np.testing.assert_array_equal(alone_states, states[:int(offsets[2])])  # the RTP-LX group's own file




def test_fold_probes_leave_each_fold_out_and_the_last_sees_all() -> None:
    from polytox.scoring.ml.attention import fit_attention_probe
    from polytox.training.scorer.attention_fit import fold_probes, fold_scores, take

    rng = np.random.default_rng(4)
    states, offsets, toxic = _bags(rng, 60, dims=4)
    fit_rows = np.arange(100, 160)  # example row numbers; text k of ``states`` is example 100 + k
    position = np.full(160, -1)
    position[fit_rows] = np.arange(60)
    folds = [fit_rows[:20], fit_rows[20:40], fit_rows[40:]]
    weight = np.where(np.arange(60) < 30, 1.0, 0.3)

    def target(rows: np.ndarray) -> np.ndarray:
        return toxic[position[rows]].astype(float)

    probes = fold_probes(states, offsets, position, fit_rows, folds, target, (10.0, 1.0), weight)
    assert len(probes) == 4
    rows = fit_rows[20:]  # the first fold left out
    alone = fit_attention_probe(*take(states, offsets, position[rows]), target(rows), 10.0, 1.0,
                                weight=weight[position[rows]])
    np.testing.assert_allclose(probes[0].w, alone.w, atol=1e-6)
    full = fit_attention_probe(states, offsets, toxic.astype(float), 10.0, 1.0, weight=weight)
    np.testing.assert_allclose(probes[-1].w, full.w, atol=1e-6)
    assert len(fold_probes(states, offsets, position, fit_rows, folds, target, (10.0, 1.0), final=False)) == 3
    short = fold_probes(states, offsets, position, fit_rows, folds, target, (10.0, 1.0), weight, max_iter=2)
    two = fit_attention_probe(*take(states, offsets, position[rows]), target(rows), 10.0, 1.0, max_iter=2,
                              weight=weight[position[rows]])
    np.testing.assert_allclose(short[0].w, two.w, atol=1e-6)  # the cap reaches the fold fits
    assert not np.allclose(short[0].w, probes[0].w, atol=1e-4)
    read = fit_rows[10:50]  # rows of the first two folds only
    oof = fold_scores(probes, folds, read, position, states, offsets, 160)
    np.testing.assert_allclose(oof[110:120], probes[0].score(*take(states, offsets, np.arange(10, 20))), atol=1e-6)
    np.testing.assert_allclose(oof[120:140], probes[1].score(*take(states, offsets, np.arange(20, 40))), atol=1e-6)
    assert np.isnan(oof[:110]).all() and np.isnan(oof[150:]).all()  # unread rows, and the final probe unread
    assert not np.allclose(oof[120:140], probes[-1].score(*take(states, offsets, np.arange(20, 40))))


def test_probe_fit_runs_on_fit_threads_and_gives_the_caller_its_threads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The L-BFGS fit runs on ``FIT_THREADS`` threads (multi-threaded gradient sums differed in the last bits
    under CPU load, and a retrain then wrote another head), whatever the caller set, and restores it."""
    torch = pytest.importorskip("torch")
    from polytox.scoring.ml import attention

    seen: list[int] = []
    pooled = attention._pooled_scores

    def spy(*args: object) -> object:
        seen.append(torch.get_num_threads())
        return pooled(*args)

    monkeypatch.setattr(attention, "_pooled_scores", spy)
    states, offsets, toxic = _bags(np.random.default_rng(3), 200)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        probe = attention.fit_attention_probe(states, offsets, toxic.astype(float), alpha_w=10.0, alpha_v=1.0,
                                              max_iter=5)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert len(seen) >= 5 and set(seen) == {attention.FIT_THREADS} == {1}
    assert np.isfinite(probe.v).all() and np.abs(probe.v).max() > 0




