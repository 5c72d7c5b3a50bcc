"""Teacher rows in the non-English ridges (``TrainConfig.teacher_weight``): the English path's out-of-fold
reading of each source, and what the rows do to a fit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from polytox.errors import PolytoxError
from polytox.training.scorer.consistency import translation_pairs
from polytox.training.scorer.data import Example
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.train import (
    Features,
    TrainConfig,
    cross_validate,
    english_reading,
    fit_parts,
    other_config,
    part_outputs,
    train,
)
from tests.test_consistency import small_pool


@pytest.fixture(scope="module")
def small(shared_data: Path) -> tuple[TrainConfig, list[Example], Features]:
    """``small_pool`` with synthetic mean-pool features: a language shift the target does not follow, plus
    signal."""
    config, examples, feats = small_pool(shared_data)
    rng = np.random.default_rng(0)
    shift = {lang: rng.normal(size=16) for lang in sorted({e.lang for e in examples})}
    signal = np.array([e.target for e in examples])[:, None] * rng.normal(size=16)
    emb = np.stack([shift[e.lang] for e in examples]) + signal + 0.3 * rng.normal(size=(len(examples), 16))
    return config, examples, replace(feats, emb=emb.astype(np.float32))


def _train_rows(examples: list[Example]) -> np.ndarray:
    return np.flatnonzero(~np.array(heldout_mask(examples), dtype=bool))


def test_the_english_reading_is_an_out_of_fold_web_value_of_english_rows_only(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    config, examples, feats = small
    rows = _train_rows(examples)
    _, base_raw, _ = cross_validate(config, examples, feats, rows)
    assert "teacher" not in base_raw
    _, raw, folds = cross_validate(replace(config, teacher_weight=3.0), examples, feats, rows)
    teacher = raw["teacher"]
    english = np.array([e.lang == "en" for e in examples])
    in_rows = np.zeros(len(examples), dtype=bool)
    in_rows[rows] = True
    assert np.isfinite(teacher[english & in_rows]).all()
    assert np.isnan(teacher[~english | ~in_rows]).all()
    assert teacher[english & in_rows].min() >= 0.0 and teacher[english & in_rows].max() <= 1.0
    # it reads the English path: the same English outputs as without teacher rows, and it ranks what it read
    np.testing.assert_array_equal(raw["ngram"][english], base_raw["ngram"][english])
    np.testing.assert_array_equal(teacher, english_reading(config, examples, feats, raw, folds))
    # the English probe scores English texts and RTP-LX rows only (``fit_english_attention``): the reading
    # stays finite where it is read
    rng = np.random.default_rng(1)
    scored = english | np.array([e.source == "rtp-lx" for e in examples])
    probe = np.where(scored, raw["ngram"] + 0.1 * rng.normal(size=len(examples)), np.nan)
    with_probe = english_reading(config, examples, feats, {**raw, "probe": probe}, folds)
    assert np.isfinite(with_probe[english & in_rows]).all() and np.isnan(with_probe[~english]).all()
    persp = np.array([e.domain == "perspective" for e in examples]) & english & in_rows
    target = np.array([e.target for e in examples])
    assert np.corrcoef(teacher[persp], target[persp])[0, 1] > 0.5


def test_teacher_rows_tie_each_translation_to_its_sources_english_reading(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    """Both ridges' output of a translation follows its source's English reading more closely; the rows'
    own offset takes their level, so shifting every reading by a constant leaves the weights alone."""
    config, examples, feats = small
    rows = _train_rows(examples)
    taught_config = replace(config, teacher_weight=3.0)
    teacher = cross_validate(taught_config, examples, feats, rows)[1]["teacher"]
    t_pos, s_pos = translation_pairs(examples, rows)
    assert len(t_pos) > 100
    plain = fit_parts(other_config(config), feats, examples, rows)
    taught = fit_parts(other_config(taught_config), feats, examples, rows, teacher)
    again = fit_parts(other_config(config), feats, examples, rows, teacher)  # no weight: no rows
    np.testing.assert_array_equal(again.w_ngram, plain.w_ngram)
    reading = teacher[rows[s_pos]]
    for k in (0, 1):
        before = part_outputs(plain, feats, rows)[k]
        after = part_outputs(taught, feats, rows)[k]
        assert before is not None and after is not None
        r_before = np.corrcoef(before[t_pos], reading)[0, 1]
        r_after = np.corrcoef(after[t_pos], reading)[0, 1]
        assert r_after > r_before + 0.02, (k, r_before, r_after)
    shifted = fit_parts(other_config(taught_config), feats, examples, rows, teacher + 0.25)
    for name in ("w_ngram", "w_emb"):  # the offsets' penalty is small, not nil (``OFFSET_SCALE``)
        moved = np.abs(getattr(shifted, name) - getattr(taught, name)).sum()
        taught_by = np.abs(getattr(taught, name) - getattr(plain, name)).sum()
        assert moved < 0.1 * taught_by, (name, moved, taught_by)


def test_teacher_rows_need_offsets_and_stand_alone(small: tuple[TrainConfig, list[Example], Features]) -> None:
    config, examples, feats = small
    rows = _train_rows(examples)
    teacher = np.where([e.lang == "en" for e in examples], 0.5, np.nan)
    taught = other_config(replace(config, teacher_weight=3.0))
    with pytest.raises(PolytoxError, match="task offsets"):
        fit_parts(replace(taught, task_offsets=False), feats, examples, rows, teacher)
    with pytest.raises(PolytoxError, match="separate candidates"):
        fit_parts(replace(taught, pair_weight=3.0), feats, examples, rows, teacher)
    # a source without a reading makes no row: all-NaN readings give the plain fit
    none = fit_parts(taught, feats, examples, rows, np.full(len(examples), np.nan))
    np.testing.assert_array_equal(none.w_ngram, fit_parts(other_config(config), feats, examples, rows).w_ngram)


def test_english_parts_stay_and_an_unset_weight_is_recorded_nowhere(
        small: tuple[TrainConfig, list[Example], Features]) -> None:
    config, examples, feats = small
    config = replace(config, attention=False, english_attention=False)  # no backbone for a probe
    base = train(config, examples, feats=feats).head
    taught = train(replace(config, teacher_weight=3.0), examples, feats=feats).head
    np.testing.assert_array_equal(taught.w_ngram, base.w_ngram)
    assert base.w_emb is not None and taught.w_emb is not None
    np.testing.assert_array_equal(taught.w_emb, base.w_emb)
    assert taught.combine["full"] == base.combine["full"]
    assert taught.w_ngram_other is not None and base.w_ngram_other is not None
    assert not np.allclose(taught.w_ngram_other, base.w_ngram_other)
    assert "teacher_weight" not in config.to_dict()
    assert taught.meta["config"]["teacher_weight"] == 3.0
