"""The ``hf`` scorer on tiny randomly initialised BERT / RoBERTa / XLM-R checkpoints built in the test.

Every value is checked against a plain, one-text-at-a-time transformers forward pass of the same model, so
the tests pin label mapping, activation, truncation and batching invariance to numbers, not to "it ran".
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from polytox.errors import PolytoxError  # noqa: E402
from polytox.registry import names  # noqa: E402
from polytox.scoring import CachedScorer, build_scorer  # noqa: E402
from polytox.scoring.hf_classifier import HfClassifierScorer  # noqa: E402

from .tiny_hf import SENTENCES, bert_classifier, one_torch_thread, roberta_classifier  # noqa: E402

TOXIC_BERT = {0: "toxic", 1: "severe_toxic", 2: "obscene", 3: "threat", 4: "insult", 5: "identity_hate"}
TEXTS = [*SENTENCES, "you", "idiot " * 30, "the park"]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_torch_thread():
        yield


def reference(
    path: Path, texts: list[str], activation: str, max_length: int = 64, side: str = "right"
) -> list[list[float]]:
    """Probabilities from a plain per-text forward pass (no batching, no padding)."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    tok.truncation_side = side
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
            logits = model(**enc).logits[0]
            probs = torch.sigmoid(logits) if activation == "sigmoid" else torch.softmax(logits, -1)
            rows.append(probs.tolist())
    return rows


def values(scores: list[Any], attribute: str = "toxicity") -> list[float]:
    assert all(s.ok for s in scores), [s.error for s in scores if not s.ok]
    return [s.values[attribute] for s in scores]


def test_registered_with_the_other_scorers() -> None:
    assert {"hf", "detoxify", "llama-guard"} <= set(names("scorer"))


def test_multi_label_bert_maps_labels_and_matches_a_plain_forward_pass(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", TOXIC_BERT, problem_type="multi_label_classification")
    scorer = HfClassifierScorer(model=str(path), device="cpu", dtype="float32")
    assert scorer.attributes == (
        "toxicity",
        "severe_toxicity",
        "obscene",
        "threat",
        "insult",
        "identity_attack",
    )
    assert scorer.engine.plan.activation == "sigmoid"
    scores = scorer.score(TEXTS, ["en"] * len(TEXTS))
    expected = reference(path, TEXTS, "sigmoid")
    for score, row in zip(scores, expected, strict=True):
        assert set(score.values) == set(scorer.attributes)
        got = [score.values[a] for a in scorer.attributes]
        assert got == pytest.approx(row, abs=1e-5)
        assert all(0.0 <= v <= 1.0 for v in got)
    # Random weights, but the scores still differ from text to text (the test would catch a constant).
    assert max(values(scores)) - min(values(scores)) > 0.05


def test_binary_softmax_roberta_scores_the_positive_class(tmp_path: Path) -> None:
    path = roberta_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"})
    scorer = HfClassifierScorer(model=str(path), device="cpu", dtype="float32")
    assert scorer.attributes == ("toxicity",) and scorer.engine.plan.activation == "softmax"
    assert scorer.engine.max_length == 64  # 66 positions - padding offset 2, as RoBERTa counts them
    got = values(scorer.score(TEXTS, ["en"] * len(TEXTS)))
    assert got == pytest.approx([row[1] for row in reference(path, TEXTS, "softmax")], abs=1e-5)


def test_scores_do_not_depend_on_batch_size_budget_or_order(tmp_path: Path) -> None:
    path = roberta_classifier(tmp_path / "m", {0: "LABEL_0", 1: "LABEL_1"}, xlm=True)
    texts = TEXTS * 3
    baseline = values(
        HfClassifierScorer(model=str(path), batch_size=1, device="cpu", dtype="float32").score(
            texts, ["en"] * len(texts)
        )
    )
    for opts in (
        {"batch_size": "7"},
        {"batch_size": "64", "max_batch_tokens": "100"},
        {"max_batch_tokens": "0"},
    ):
        scorer = HfClassifierScorer(model=str(path), device="cpu", dtype="float32", **opts)
        order = list(range(len(texts)))
        random.Random(len(opts)).shuffle(order)
        shuffled = values(scorer.score([texts[i] for i in order], ["en"] * len(texts)))
        back = [0.0] * len(texts)
        for position, i in enumerate(order):
            back[i] = shuffled[position]
        assert back == pytest.approx(baseline, abs=1e-5), opts
    assert scorer.engine.stats.batches >= 1


def test_truncation_keeps_the_head_or_the_tail(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"})
    words = ("you are a stupid idiot and a moron " * 4).split()
    long_text = " ".join(words)  # 32 words = 32 tokens, cut to 6 + [CLS] [SEP]
    head = HfClassifierScorer(model=str(path), max_length="8", device="cpu", dtype="float32")
    tail = HfClassifierScorer(
        model=str(path), max_length="8", truncation="tail", device="cpu", dtype="float32"
    )
    [h_long, h_short] = values(head.score([long_text, " ".join(words[:6])], ["en", "en"]))
    [t_long, t_short] = values(tail.score([long_text, " ".join(words[-6:])], ["en", "en"]))
    assert h_long == pytest.approx(h_short, abs=1e-6)
    assert t_long == pytest.approx(t_short, abs=1e-6)
    assert h_long != pytest.approx(t_long, abs=1e-4)
    assert head.engine.stats.truncated == 1 and tail.engine.stats.truncated == 1
    assert head.version != tail.version  # the policy is part of the cache identity


def test_a_text_the_model_crashes_on_fails_alone(tmp_path: Path) -> None:
    # The model's vocabulary is 3 entries short of the tokenizer's: the last 3 words crash the embedding.
    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"}, vocab_pad=-3)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    size = transformers.AutoConfig.from_pretrained(path).vocab_size
    poison = next(w for w, i in tok.get_vocab().items() if i >= size)
    texts = ["you are nice", f"you are {poison}", "the park", "", "lovely today"]
    scorer = HfClassifierScorer(model=str(path), device="cpu", dtype="float32", languages="en,fr")
    scores = scorer.score(texts, ["en", "en", "en", "en", "de"])
    assert [s.ok for s in scores] == [True, False, True, False, False]
    assert scores[1].error.startswith("SCORER_ERROR: IndexError") and scores[1].transient
    assert scores[3].error.startswith("EMPTY_TEXT") and scores[4].error.startswith("LANGUAGE_NOT_SUPPORTED")
    clean = HfClassifierScorer(model=str(path), device="cpu", dtype="float32", batch_size="1")
    assert scores[0].values["toxicity"] == pytest.approx(
        clean.score(["you are nice"], ["en"])[0].values["toxicity"], abs=1e-6
    )
    assert scorer.engine.stats.failed == 1


def test_a_text_the_tokenizer_rejects_fails_alone(tmp_path: Path) -> None:
    # A lone surrogate (what decoding invalid UTF-8 with surrogateescape leaves) makes the Rust tokenizer
    # raise for the whole call; only that text may fail, with a permanent, cacheable reason.
    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"})
    scorer = HfClassifierScorer(model=str(path), device="cpu", dtype="float32")
    texts = ["you are nice", "bad \udcff bytes", "the park"]
    # Through the Scorer contract the surrogate is caught before any model sees it ...
    checked = scorer.score(texts, ["en"] * 3)
    assert [s.ok for s in checked] == [True, False, True]
    assert checked[1].error.startswith("INVALID_TEXT") and not checked[1].transient
    # ... and the engine itself isolates a text its tokenizer rejects, should one get that far.
    scores = scorer.score_batch(texts, ["en"] * 3)
    assert [s.ok for s in scores] == [True, False, True]
    assert scores[1].error.startswith("BAD_TEXT: the tokenizer rejects this text") and not scores[1].transient
    assert values([scores[0], scores[2]]) == pytest.approx(
        values(scorer.score([texts[0], texts[2]], ["en"] * 2))
    )


def test_bfloat16_is_close_to_float32_and_cached_apart(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"})
    exact = HfClassifierScorer(model=str(path), device="cpu", dtype="float32")
    half = HfClassifierScorer(model=str(path), device="cpu", dtype="bfloat16")
    assert half.describe()["dtype"] == "bfloat16" and half.id != exact.id
    a = values(exact.score(TEXTS, ["en"] * len(TEXTS)))
    b = values(half.score(TEXTS, ["en"] * len(TEXTS)))
    assert b == pytest.approx(a, abs=0.05)


def test_built_by_name_with_string_options_and_cached(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", TOXIC_BERT, problem_type="multi_label_classification")
    scorer = build_scorer(
        "hf",
        {
            "model": str(path),
            "attributes": "insult",
            "device": "cpu",
            "dtype": "float32",
            "cache": str(tmp_path / "cache.sqlite"),
        },
    )
    assert isinstance(scorer, CachedScorer) and scorer.attributes == ("toxicity", "insult")
    first = scorer.score(TEXTS, ["en"] * len(TEXTS))
    again = scorer.score(TEXTS, ["en"] * len(TEXTS))
    assert scorer.hits == len(TEXTS) and [s.values for s in again] == [s.values for s in first]
    assert scorer.id.startswith("hf@m-")


def test_retrained_weights_in_the_same_folder_change_the_cache_identity(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"}, seed=1)
    before = HfClassifierScorer(model=str(path), device="cpu", dtype="float32").id
    bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"}, seed=2)
    assert HfClassifierScorer(model=str(path), device="cpu", dtype="float32").id != before


def test_bad_options_fail_clearly(tmp_path: Path) -> None:
    path = bert_classifier(tmp_path / "m", {0: "a", 1: "b", 2: "c"})
    with pytest.raises(PolytoxError, match="model=HUB_ID_OR_FOLDER"):
        HfClassifierScorer()
    with pytest.raises(PolytoxError, match="toxicity_label=NAME"):
        HfClassifierScorer(model=str(path), device="cpu", dtype="float32")
    with pytest.raises(PolytoxError, match="truncation must be head or tail"):
        HfClassifierScorer(
            model=str(path), toxicity_label="b", truncation="middle", device="cpu", dtype="float32"
        )
    with pytest.raises(PolytoxError, match="batch_size must be an integer"):
        HfClassifierScorer(
            model=str(path), toxicity_label="b", batch_size="many", device="cpu", dtype="float32"
        )
    with pytest.raises(PolytoxError, match="could not load"):
        HfClassifierScorer(model=str(tmp_path / "nowhere"), device="cpu", dtype="float32")


def test_eval_runs_end_to_end_with_the_hf_scorer(tmp_path: Path) -> None:
    import duckdb

    from polytox.runner import execute_run as evaluate
    from polytox.spec import spec_from_flat

    path = bert_classifier(tmp_path / "m", {0: "neutral", 1: "toxic"})
    spec = spec_from_flat(
        {
            "model": "fake",
            "samples": 2,
            "limit": 4,
            "lang": "en",
            "scorer": "hf",
            "scorer_opt": [f"model={path}", "device=cpu"],
        }
    )
    result = evaluate(spec, tmp_path / "run")
    overall = result.metrics["overall"]
    scores = duckdb.sql(f"SELECT toxicity, error FROM '{result.path}/scores/*/*.parquet'").fetchall()
    # An empty continuation is an EMPTY_TEXT error, counted as missing, never a 0.
    empty = sum(1 for tox, err in scores if err is not None and err.startswith("EMPTY_TEXT") and tox is None)
    assert overall["n_generations"] == 8 and overall["n_missing_scores"] == empty
    assert all(0.0 <= tox <= 1.0 for tox, err in scores if err is None)
    assert 0.0 < overall["emt"] < 1.0
    assert result.metrics["scorer"].startswith("hf@m-")
