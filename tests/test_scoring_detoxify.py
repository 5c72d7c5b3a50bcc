"""``detoxify``: the three checkpoints' label sets, languages and loading paths, on tiny models.

Architectures match the real ones (BERT for original, RoBERTa for unbiased, XLM-R for multilingual);
the label layouts match the Hub mirrors' configs and Detoxify's release checkpoints. Where the
``detoxify`` package is installed, its own ``predict`` is the reference the scores must equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from polytox.errors import PolytoxError  # noqa: E402
from polytox.scoring import check_languages, check_scorer  # noqa: E402
from polytox.scoring.detoxify_scorer import JIGSAW_2019, MODELS, DetoxifyScorer, resolve_source  # noqa: E402
from polytox.types import Score  # noqa: E402

from .tiny_hf import SENTENCES, bert_classifier, one_torch_thread, roberta_classifier  # noqa: E402

TOXIC_BERT = {0: "toxic", 1: "severe_toxic", 2: "obscene", 3: "threat", 4: "insult", 5: "identity_hate"}
IDENTITIES = (
    "male",
    "female",
    "homosexual_gay_or_lesbian",
    "christian",
    "jewish",
    "muslim",
    "black",
    "white",
    "psychiatric_or_mental_illness",
)
UNBIASED = dict(enumerate((*JIGSAW_2019, *IDENTITIES)))  # unitary/unbiased-toxic-roberta's 16 outputs


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_torch_thread():
        yield


def sigmoid_reference(path: Path, texts: list[str], indices: list[int]) -> list[float]:
    """Detoxify's computation, one text at a time: sigmoid of every logit, flattened."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        return [
            v
            for t in texts
            for v in torch.sigmoid(model(**tok(t, truncation=True, return_tensors="pt")).logits[0])[
                indices
            ].tolist()
        ]


def rows(scores: list[Score], attributes: tuple[str, ...]) -> list[float]:
    """Every value of every score, flattened (``pytest.approx`` compares flat lists)."""
    assert all(s.ok for s in scores), [s.error for s in scores]
    return [s.values[a] for s in scores for a in attributes]


@pytest.fixture
def offline_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hub calls fail at once (huggingface_hub reads HF_HUB_OFFLINE at import, before conftest sets it)."""
    hub_constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


def test_original_renames_jigsaw_2018_labels_and_always_uses_sigmoid(tmp_path: Path) -> None:
    # toxic-bert's config does not say multi-label; Detoxify applies a sigmoid anyway, and so do we.
    path = bert_classifier(tmp_path / "toxic-bert", TOXIC_BERT)
    scorer = DetoxifyScorer(model="original", path=str(path), device="cpu", dtype="float32")
    assert scorer.attributes == (
        "toxicity",
        "severe_toxicity",
        "obscene",
        "threat",
        "insult",
        "identity_attack",
    )
    assert scorer.languages == frozenset({"en"}) and scorer.source == "hf"
    got = rows(scorer.score(SENTENCES, ["en"] * len(SENTENCES)), scorer.attributes)
    assert got == pytest.approx(sigmoid_reference(path, SENTENCES, list(range(6))), abs=1e-5)


def test_unbiased_keeps_the_seven_toxicity_outputs_and_drops_identity_mentions(tmp_path: Path) -> None:
    path = roberta_classifier(tmp_path / "unbiased", UNBIASED)
    scorer = DetoxifyScorer(model="unbiased", path=str(path), device="cpu", dtype="float32")
    assert scorer.attributes == JIGSAW_2019
    got = rows(scorer.score(SENTENCES, ["en"] * len(SENTENCES)), scorer.attributes)
    assert got == pytest.approx(sigmoid_reference(path, SENTENCES, list(range(7))), abs=1e-5)


def test_multilingual_covers_seven_languages_and_maps_generic_labels_by_position(tmp_path: Path) -> None:
    path = roberta_classifier(tmp_path / "multi", {i: f"LABEL_{i}" for i in range(16)}, xlm=True)
    scorer = DetoxifyScorer(model="multilingual", path=str(path), device="cpu", dtype="float32")
    assert scorer.languages == frozenset({"en", "fr", "es", "it", "pt", "tr", "ru"})
    assert scorer.attributes == JIGSAW_2019
    texts = ["les gens sont gentils ici", "eres un idiota", "you are a stupid idiot", "merhaba", "hallo"]
    scores = scorer.score(texts, ["fr", "es", "en", "tr", "de"])
    assert rows(scores[:4], scorer.attributes) == pytest.approx(
        sigmoid_reference(path, texts[:4], list(range(7))), abs=1e-5
    )
    assert scores[4].error is not None and scores[4].error.startswith("LANGUAGE_NOT_SUPPORTED")
    with pytest.raises(PolytoxError, match="does not support language"):
        check_languages(scorer, {"en", "ja"})
    assert (
        DetoxifyScorer(
            model="multilingual", path=str(path), device="cpu", dtype="float32", languages="any"
        ).languages
        is None
    )


def test_an_old_single_output_mirror_gives_toxicity_only(tmp_path: Path) -> None:
    path = roberta_classifier(tmp_path / "multi-v1", {0: "toxic"}, xlm=True)
    scorer = DetoxifyScorer(model="multilingual", path=str(path), device="cpu", dtype="float32")
    assert scorer.attributes == ("toxicity",)


def test_sources_and_identities_never_mix_in_the_cache(tmp_path: Path, offline_hub: None) -> None:
    path = bert_classifier(tmp_path / "toxic-bert", TOXIC_BERT)
    a = DetoxifyScorer(model="original", path=str(path), device="cpu", dtype="float32")
    b = DetoxifyScorer(model="original", path=str(path), device="cpu", dtype="float32", max_length="16")
    assert a.id.startswith("detoxify@original-hf-") and a.id != b.id
    assert a.describe()["model"].startswith("hf:toxic-bert:")
    with pytest.raises(PolytoxError, match=r"^unknown Detoxify model 'tiny'; choose one of original, "):
        check_scorer("detoxify", {"model": "tiny"})  # the schema refuses it, before any constructor
    with pytest.raises(PolytoxError, match="not both"):
        resolve_source("auto", path="x", checkpoint="y")
    with pytest.raises(PolytoxError, match="source=detoxify"):
        resolve_source("hf", path="", checkpoint="x.ckpt")
    assert resolve_source("auto", path="dir", checkpoint="") == "hf"
    assert resolve_source("auto", path="", checkpoint="f.ckpt") == "detoxify"
    with pytest.raises(PolytoxError, match="could not load"):  # the Hub mirror, offline
        DetoxifyScorer(model="unbiased", source="hf", device="cpu", dtype="float32")


def test_release_checkpoint_through_the_detoxify_package_matches_its_predict(tmp_path: Path) -> None:
    detoxify = pytest.importorskip("detoxify")
    path = bert_classifier(tmp_path / "base", TOXIC_BERT)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path)
    # The layout of Detoxify's release .ckpt files: the training config and the state dict.
    ckpt = tmp_path / "toxic_original-test.ckpt"
    torch.save(
        {
            "config": {
                "arch": {
                    "args": {
                        "model_type": str(path),
                        "num_classes": 6,
                        "model_name": "BertForSequenceClassification",
                        "tokenizer_name": "PreTrainedTokenizerFast",
                    }
                },
                "dataset": {"args": {"classes": list(TOXIC_BERT.values())}},
            },
            "state_dict": model.state_dict(),
        },
        ckpt,
    )
    scorer = DetoxifyScorer(
        model="original", checkpoint=str(ckpt), hf_config=str(path), device="cpu", dtype="float32"
    )
    assert scorer.source == "detoxify" and scorer.id.startswith("detoxify@original-detoxify-")
    theirs = detoxify.Detoxify(checkpoint=str(ckpt), huggingface_config_path=str(path)).predict(SENTENCES)
    ours = scorer.score(SENTENCES, ["en"] * len(SENTENCES))
    for attribute in scorer.attributes:
        assert [s.values[attribute] for s in ours] == pytest.approx(theirs[attribute], abs=1e-5)
    with pytest.raises(PolytoxError, match="the detoxify package could not load"):
        DetoxifyScorer(
            model="original", checkpoint=str(tmp_path / "missing.ckpt"), device="cpu", dtype="float32"
        )


def test_every_profile_names_its_hub_mirror_and_release() -> None:
    assert {m.hub_id for m in MODELS.values()} == {
        "unitary/toxic-bert",
        "unitary/unbiased-toxic-roberta",
        "unitary/multilingual-toxic-xlm-roberta",
    }
    assert all(m.classes[0] == "toxicity" for m in MODELS.values())
