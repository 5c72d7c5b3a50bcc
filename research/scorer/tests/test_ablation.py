"""The ablation study (research/scorer/ablation.py) on a small hash-fixed subset of the real shared data:
it measures out of fold on the training split only, and hashes and fits each variant its own way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from polytox.scoring.ml.ngrams import NgramConfig
from polytox.training.scorer.data import Example
from polytox.training.scorer.train import TrainConfig
from tests.test_trainscorer import SMALL_NGRAM, small_config


def test_ablation_measures_out_of_fold_on_the_training_split_only(
        shared_data: Path, pool: list[Example], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every modelling choice is compared without the held-out split: flipping its labels changes nothing."""
    from dataclasses import replace

    from polytox.training.scorer.pack import heldout_mask
    from research.scorer import ablation

    config = small_config(shared_data)
    variants = {"chosen": {}, "no task weights": {"task_weights": False}}
    monkeypatch.setattr(ablation, "training_pool", lambda shared, langs: pool)
    first = ablation.run(config, variants)
    flipped = [replace(e, target=1.0 - e.target, label=not e.label, share=None if e.share is None else 1 - e.share)
               if h else e for e, h in zip(pool, heldout_mask(pool), strict=True)]
    monkeypatch.setattr(ablation, "training_pool", lambda shared, langs: flipped)
    second = ablation.run(config, variants)
    for data in (first, second):
        for v in data["variants"].values():
            v.pop("seconds")
    assert first == second
    chosen, unweighted = first["variants"]["chosen"]["ngram"], first["variants"]["no task weights"]["ngram"]
    assert 0.5 < chosen["auc_prompts"] <= 1 and chosen != unweighted  # one TrainConfig change, measured
    run = chosen["run"]
    assert run["n_prompts"] > 0 and run["emt_diff_ci"][0] <= run["emt_diff"] <= run["emt_diff_ci"][1]
    tables = ablation.markdown_tables(first)
    assert "Mode `ngram`:" in tables and f"| chosen | {run['n_prompts']} | {run['emt_diff']:+.3f} [" in tables


def test_ablation_hashes_a_bucket_variant_with_its_own_ngram_config(
        shared_data: Path, pool: list[Example], monkeypatch: pytest.MonkeyPatch) -> None:
    """A variant that changes the hashing is measured on counts hashed its way: exactly what a run with that
    config as the default gives, and not the default's numbers."""
    from dataclasses import replace

    from research.scorer import ablation

    config = small_config(shared_data)
    other = NgramConfig(n_features=SMALL_NGRAM.n_features // 4)
    monkeypatch.setattr(ablation, "training_pool", lambda shared, langs: pool)
    data = ablation.run(config, {"chosen": {}, "fewer buckets": {"ngram": other}})["variants"]
    alone = ablation.run(replace(config, ngram=other), {"chosen": {}})["variants"]["chosen"]
    assert data["fewer buckets"]["change"] == {"ngram": other.to_dict()}  # recorded as JSON
    for v in (*data.values(), alone):
        v.pop("seconds")
    assert data["fewer buckets"]["ngram"] == alone["ngram"]
    assert data["fewer buckets"]["ngram"] != data["chosen"]["ngram"]


def test_ablation_fits_the_probes_train_scorer_would_once_per_distinct_input(
        shared_data: Path, pool: list[Example], tiny_backbone: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With a backbone, every variant is read with its attention probes, as train-scorer fits them: shared
    where the probe's inputs are the chosen ones, refitted where the rows change, absent where switched off."""
    from research.scorer import ablation

    config = small_config(shared_data, backbone=str(tiny_backbone), layers=(1, 3), subset=0.01,
                          embedding_cache=str(tmp_path / "emb.sqlite"))
    fitted: list[tuple[bool, int]] = []
    real = ablation.attention_scores

    def counting(variant: TrainConfig, examples: list[Example], train_rows: np.ndarray, english: bool = False
                 ) -> object:
        fitted.append((english, len(examples)))
        return real(variant, examples, train_rows, english=english)

    monkeypatch.setattr(ablation, "training_pool", lambda shared, langs: pool)
    monkeypatch.setattr(ablation, "attention_scores", counting)
    variants = {"chosen": {}, "no English probe": {"english_attention": False},
                "no attention probe": {"attention": False, "english_attention": False},
                "no task weights": {"task_weights": False}, "no pack human data": {"human_data": False}}
    data = ablation.run(config, variants)["variants"]
    other = [n for english, n in fitted if not english]
    assert len(other) == 2 and other[0] > other[1]  # chosen and "no task weights" share; fewer rows: refitted
    # the English probe's fit weighs rows by task: "no task weights" refits it, and so do fewer rows
    assert [n for english, n in fitted if english] == [other[0], other[0], other[1]]
    chosen, no_en, plain = data["chosen"], data["no English probe"], data["no attention probe"]
    assert chosen["ngram"] == no_en["ngram"] == plain["ngram"]  # only the full mode's combiners read probes
    english_keys = ("auc_prompts", "auc_web_continuations", "mae_web", "ece_model_continuations")
    for key in english_keys:  # the non-English probe leaves English alone
        assert no_en["full"][key] == plain["full"][key]
    assert any(chosen["full"][key] != no_en["full"][key] for key in english_keys)  # the English probe does not
    assert chosen["full"]["mean_auc_humans"] == no_en["full"]["mean_auc_humans"]  # ... and leaves the rest alone
    assert no_en["full"]["mean_auc_humans"] != plain["full"]["mean_auc_humans"]
