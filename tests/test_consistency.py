"""The consistency term of the non-English ridges: which pairs it reads and what it does to a fit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from polytox.errors import PolytoxError
from polytox.scoring.ml.ngrams import NgramConfig
from polytox.training.scorer.consistency import translation_pairs
from polytox.training.scorer.data import EVERYDAY_DOMAIN, Example
from polytox.training.scorer.train import (
    Features,
    TrainConfig,
    build_features,
    fit_parts,
    other_config,
    part_outputs,
    select,
    train,
)

SMALL_NGRAM = NgramConfig(n_features=2**14)


def _lx(lang: str, index: int, rating: float) -> Example:
    return Example(text=f"{lang}{index}", lang=lang, target=(rating - 1) / 4, label=rating >= 3, source="rtp-lx",
                   group=f"lx:{index}", rating=rating)


def _ud(lang: str, group: str) -> Example:
    return Example(text=f"{lang}{group}", lang=lang, target=0.0, label=False, source="ud-sentences", group=group,
                   kind="sentence", domain=EVERYDAY_DOMAIN)


def test_pairs_are_preserving_translations_of_a_source_among_the_rows() -> None:
    examples = [
        _lx("en", 5, 2.0), _lx("de", 5, 2.4), _lx("fr", 5, 3.0),  # de keeps the level, fr does not
        _lx("en", 1005, 1.0), _lx("ar", 1005, 1.0),  # cultural additions: no shared source
        _ud("en", "ud:pud:n01"), _ud("sv", "ud:pud:n01"),
        _ud("en", "ud:UD_English-EWT:x"), _ud("sv", "ud:UD_Swedish-LinES:x"),  # not parallel
        _lx("de", 7, 1.0), _lx("en", 7, 1.0),  # the source after its translation
    ]
    rows = np.arange(len(examples))
    t, s = translation_pairs(examples, rows)
    got = {(examples[rows[a]].text, examples[rows[b]].text) for a, b in zip(t, s, strict=True)}
    assert got == {("de5", "en5"), ("svud:pud:n01", "enud:pud:n01"), ("de7", "en7")}
    # positions are positions in ``rows``; a source outside the rows makes no pair
    sub = np.array([1, 0, 10])
    t, s = translation_pairs(examples, sub)
    assert t.tolist() == [0] and s.tolist() == [1]
    assert translation_pairs(examples, np.array([1, 2, 9])) == (pytest.approx([]), pytest.approx([]))


def small_pool(shared_data: Path) -> tuple[TrainConfig, list[Example], Features]:
    """A 5% pool with Parallel UD rows, 3 folds and small n-gram features, no backbone (the teacher's tests
    read it too)."""
    from polytox.training.scorer.pool import training_pool

    config = TrainConfig(shared=str(shared_data), backbone=None, ngram=SMALL_NGRAM, folds=3, subset=0.05)
    examples = select(training_pool(shared_data, everyday=True), config)
    return config, examples, build_features(config, examples)


@pytest.fixture(scope="module")
def small(shared_data: Path) -> tuple[TrainConfig, list[Example], Features]:
    return small_pool(shared_data)


def _pair_gap(parts_feats: tuple[object, Features], pairs: tuple[np.ndarray, np.ndarray], rows: np.ndarray,
              emb: bool = False) -> float:
    parts, feats = parts_feats
    out = part_outputs(parts, feats, rows)[1 if emb else 0]  # type: ignore[arg-type]
    assert out is not None
    return float(np.mean(np.abs(out[pairs[0]] - out[pairs[1]])))


def test_the_term_pulls_each_translation_toward_its_source(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    config, examples, feats = small
    rows = np.arange(len(examples))
    pairs = translation_pairs(examples, rows)
    kinds = {examples[rows[t]].domain for t in pairs[0]}
    assert len(pairs[0]) > 100 and kinds == {"rtp-lx", EVERYDAY_DOMAIN}
    plain = other_config(config)
    pulled = other_config(replace(config, consistency_weight=3.0))
    assert plain.pair_weight is None and pulled.pair_weight == 3.0
    before = _pair_gap((fit_parts(plain, feats, examples, rows), feats), pairs, rows)
    after = _pair_gap((fit_parts(pulled, feats, examples, rows), feats), pairs, rows)
    assert after < 0.7 * before, (before, after)
    with pytest.raises(PolytoxError, match="task offsets"):
        fit_parts(replace(pulled, task_offsets=False), feats, examples, rows)


def test_the_mean_pool_ridge_keeps_its_intercept_out_of_the_pairs(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    """Centred over the text rows only (difference rows need no centring), a vanishing pair weight gives the
    ordinary fit's weights and intercept back; weight 3 pulls the pairs' mean-pool outputs together."""
    config, examples, feats = small
    rng = np.random.default_rng(0)
    lang_shift = {lang: rng.normal(size=16) for lang in sorted({e.lang for e in examples})}
    signal = np.array([e.target for e in examples])[:, None] * rng.normal(size=16)
    emb = np.stack([lang_shift[e.lang] for e in examples]) + signal + 0.3 * rng.normal(size=(len(examples), 16))
    with_emb = replace(feats, emb=emb.astype(np.float32))
    rows = np.arange(len(examples))
    pairs = translation_pairs(examples, rows)
    base = fit_parts(other_config(config), with_emb, examples, rows)
    tiny = fit_parts(other_config(replace(config, consistency_weight=1e-9)), with_emb, examples, rows)
    assert base.w_emb is not None and tiny.w_emb is not None
    np.testing.assert_allclose(tiny.w_emb, base.w_emb, rtol=1e-4, atol=1e-6)
    assert tiny.b_emb == pytest.approx(base.b_emb, abs=1e-5)
    pulled = fit_parts(other_config(replace(config, consistency_weight=3.0)), with_emb, examples, rows)
    gap_base = _pair_gap((base, with_emb), pairs, rows, emb=True)
    gap_pulled = _pair_gap((pulled, with_emb), pairs, rows, emb=True)
    assert gap_pulled < 0.8 * gap_base, (gap_base, gap_pulled)


def test_english_parts_and_the_default_head_are_untouched(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    config, examples, feats = small
    base = train(config, examples, feats=feats).head
    pulled = train(replace(config, consistency_weight=3.0), examples, feats=feats).head
    np.testing.assert_array_equal(pulled.w_ngram, base.w_ngram)
    assert pulled.combine["ngram"] == base.combine["ngram"]
    assert pulled.w_ngram_other is not None and base.w_ngram_other is not None
    assert not np.allclose(pulled.w_ngram_other, base.w_ngram_other)
    # unset, the option changes nothing a head records (heads trained before it keep their digest)
    assert "consistency_weight" not in config.to_dict() and "pair_weight" not in config.to_dict()
    assert pulled.meta["config"]["consistency_weight"] == 3.0


def test_the_probe_term_pulls_paired_scores_together_and_is_absent_by_default() -> None:
    """Token bags in two "languages": the second carries a constant shift along one axis the target does not
    depend on. The pair term makes the probe read a text and its shifted twin alike."""
    from polytox.scoring.ml.attention import fit_attention_probe

    rng = np.random.default_rng(1)
    n, dims = 120, 6
    lengths = rng.integers(4, 12, size=n)
    offsets = np.concatenate([[0], np.cumsum(np.concatenate([lengths, lengths]))])
    base = [rng.normal(size=(length, dims)) for length in lengths]
    toxic = rng.random(n) < 0.4
    for bag, bad in zip(base, toxic, strict=True):
        if bad:
            bag[0, 0] += 4.0
    shifted = [bag + np.eye(dims)[1] * 1.5 for bag in base]
    states = np.concatenate(base + shifted).astype(np.float16)
    target = np.concatenate([toxic, toxic]).astype(float) + np.concatenate([np.zeros(n), np.full(n, 0.3)])
    pairs = (np.arange(n, 2 * n), np.arange(n))

    def gap(probe: object) -> float:
        scores = probe.score(states, offsets)  # type: ignore[attr-defined]
        return float(np.abs(scores[pairs[0]] - scores[pairs[1]]).mean())

    plain = fit_attention_probe(states, offsets, target, 1.0, 10.0)
    again = fit_attention_probe(states, offsets, target, 1.0, 10.0, pairs=None, pair_weight=5.0)
    np.testing.assert_array_equal(again.w, plain.w)  # without pairs the weight changes nothing
    pulled = fit_attention_probe(states, offsets, target, 1.0, 10.0, pairs=pairs, pair_weight=5.0)
    assert gap(pulled) < 0.5 * gap(plain), (gap(plain), gap(pulled))


def test_english_pud_sources_join_the_probe_fit_at_weight_zero() -> None:
    from polytox.training.scorer.attention_fit import fit_row_groups

    examples = [_lx("en", 5, 2.0), _lx("de", 5, 2.2), _ud("en", "ud:pud:n01"), _ud("sv", "ud:pud:n01"),
                _ud("en", "ud:UD_English-EWT:x")]
    rows = np.arange(len(examples))
    plain = fit_row_groups(examples, rows, None, 1.0)
    assert [(r.tolist(), w) for r, w in plain] == [([0, 1], 1.0), ([3], 1.0)]
    with_sources = fit_row_groups(examples, rows, None, 1.0, sources=True)
    assert [(r.tolist(), w) for r, w in with_sources] == [([0, 1], 1.0), ([3], 1.0), ([2], 0.0)]


def test_a_small_retrain_with_the_probe_term_changes_only_the_non_english_probe(
        shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """End to end on a tiny random backbone: each fold's probe fit gets its own rows' pairs (positions into
    the token states it reads), the non-English probe moves, the English probe and ridges do not."""
    pytest.importorskip("torch")
    from polytox.training.scorer.pool import training_pool

    from .tiny_models import make_tiny_lm

    backbone = make_tiny_lm(tmp_path_factory.mktemp("gemma3"), arch="gemma3")
    cache = tmp_path_factory.mktemp("cache") / "emb.sqlite"
    config = TrainConfig(shared=str(shared_data), backbone=str(backbone), layers=(1, 3), ngram=SMALL_NGRAM,
                         folds=3, subset=0.01, embedding_cache=str(cache))
    examples = select(training_pool(shared_data, everyday=True), config)
    feats = build_features(config, examples)
    base = train(config, examples, feats=replace(feats)).head
    pulled = train(replace(config, probe_consistency_weight=1.0), examples, feats=replace(feats)).head
    assert base.probe is not None and pulled.probe is not None and base.probe_en is not None
    assert pulled.probe_en is not None
    np.testing.assert_array_equal(pulled.probe_en.w, base.probe_en.w)
    np.testing.assert_array_equal(pulled.w_ngram, base.w_ngram)
    assert not np.allclose(pulled.probe.w, base.probe.w)
    assert pulled.meta["config"]["probe_consistency_weight"] == 1.0
