"""``llama-guard`` on tiny Llama checkpoints built in the test.

An untrained tiny Llama checks the mechanics against a plain forward pass (prompt format, P(unsafe) from
the first answer token, batching invariance, truncation, errors). A tiny Llama *taught* in a few seconds
to answer like Llama Guard (``unsafe`` + codes for texts with certain words, ``safe`` otherwise) checks
that flagged texts get a high P(unsafe) and that the categories it names are kept beside the score.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from polytox.errors import PolytoxError  # noqa: E402
from polytox.scoring import build_scorer  # noqa: E402
from polytox.scoring.llama_guard_prompt import render_documented  # noqa: E402
from polytox.scoring.safety_judge import LlamaGuardScorer  # noqa: E402

from .tiny_hf import SENTENCES, expected_verdict, llama_judge, one_torch_thread, teach_judge  # noqa: E402

TEMPLATE_WORDS = [
    render_documented("llama-guard-3", "", "user"),
    render_documented("llama-guard-1", "", "user"),
]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def untrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return llama_judge(tmp_path_factory.mktemp("judge") / "m", chat_template=False, extra_text=TEMPLATE_WORDS)


@pytest.fixture(scope="session")
def taught(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny judge with a chat template listing S1, S9, S10, trained to answer like Llama Guard."""
    path = llama_judge(tmp_path_factory.mktemp("judge") / "raw", chat_template=True)
    judge = LlamaGuardScorer(model=str(path), device="cpu", dtype="float32")
    with one_torch_thread():
        teach_judge(judge.model, judge.tokenizer, [judge.render(t) for t in SENTENCES], SENTENCES)
    out = path.parent / "taught"
    judge.model.save_pretrained(out)
    judge.tokenizer.save_pretrained(out)
    return out


def reference_p_unsafe(scorer: LlamaGuardScorer, texts: list[str]) -> list[float]:
    """P(first answer token = unsafe), one unpadded prompt at a time, straight from the model."""
    out = []
    with torch.no_grad():
        for text in texts:
            ids = scorer.tokenizer(scorer.render(text), add_special_tokens=False, return_tensors="pt")[
                "input_ids"
            ]
            logits = scorer.model(input_ids=ids).logits[0, -1]
            out.append(torch.softmax(logits.float(), -1)[scorer.unsafe_id].item())
    return out


def test_documented_format_when_there_is_no_chat_template(untrained: Path) -> None:
    lg3 = LlamaGuardScorer(model=str(untrained), format="llama-guard-3", device="cpu", dtype="float32")
    prompt = lg3.render("hello")
    assert prompt.startswith("<s><|start_header_id|>user<|end_header_id|>") and "User: hello" in prompt
    assert lg3.attributes == ("toxicity", "flagged", *[f"cat_S{i}" for i in range(1, 15)])
    auto = LlamaGuardScorer(model=str(untrained), device="cpu", dtype="float32", category_tokens="0")
    assert auto.format == "llama-guard-1" and auto.render("hi").startswith("<s>[INST] Task:")
    assert auto.attributes == ("toxicity", "flagged")  # no categories asked for: no made-up zeros either
    assert lg3.languages == frozenset({"en"})  # PTP §4.4: Llama Guard is English-only


def test_p_unsafe_is_the_first_token_probability_and_batch_invariant(untrained: Path) -> None:
    texts = [*SENTENCES, "you " * 40, "the park"]
    one = LlamaGuardScorer(
        model=str(untrained), format="llama-guard-3", batch_size="1", device="cpu", dtype="float32"
    )
    expected = reference_p_unsafe(one, texts)
    assert [s.values["toxicity"] for s in one.score(texts, ["en"] * len(texts))] == pytest.approx(
        expected, abs=1e-5
    )
    many = LlamaGuardScorer(
        model=str(untrained), format="llama-guard-3", batch_size="5", device="cpu", dtype="float32"
    )
    order = list(range(len(texts)))
    random.Random(3).shuffle(order)
    shuffled = many.score([texts[i] for i in order], ["en"] * len(texts))
    got = {i: s.values["toxicity"] for i, s in zip(order, shuffled, strict=True)}
    assert [got[i] for i in range(len(texts))] == pytest.approx(expected, abs=1e-5)
    assert all(0.0 <= p <= 1.0 for p in expected) and len(set(expected)) > 1
    assert many.stats.batches >= 3


def test_pair_probability_renormalises_over_the_two_answers(untrained: Path) -> None:
    full = LlamaGuardScorer(model=str(untrained), format="llama-guard-3", device="cpu", dtype="float32")
    pair = LlamaGuardScorer(
        model=str(untrained), format="llama-guard-3", probability="pair", device="cpu", dtype="float32"
    )
    text = SENTENCES[1]
    ids = full.tokenizer(full.render(text), add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = full.model(input_ids=ids).logits[0, -1]
    two = torch.softmax(logits[[full.safe_id, full.unsafe_id]], -1)[1].item()
    assert pair.score([text], ["en"])[0].values["toxicity"] == pytest.approx(two, abs=1e-5)
    assert full.id != pair.id


def test_long_texts_are_cut_before_the_template(untrained: Path) -> None:
    words = ("you are a stupid idiot and a moron " * 10).split()
    head = LlamaGuardScorer(
        model=str(untrained), format="llama-guard-3", max_text_tokens="5", device="cpu", dtype="float32"
    )
    tail = LlamaGuardScorer(
        model=str(untrained),
        format="llama-guard-3",
        max_text_tokens="5",
        truncation="tail",
        device="cpu",
        dtype="float32",
    )
    long_text = " ".join(words)
    assert head.score([long_text], ["en"])[0].values == head.score([" ".join(words[:5])], ["en"])[0].values
    assert tail.score([long_text], ["en"])[0].values == tail.score([" ".join(words[-5:])], ["en"])[0].values
    assert head.stats.truncated == 1 and tail.stats.truncated == 1


def test_the_taught_judge_flags_unsafe_texts_and_keeps_their_categories(taught: Path) -> None:
    judge = build_scorer(
        "llama-guard", {"model": str(taught), "device": "cpu", "dtype": "float32", "batch_size": "4"}
    )
    assert judge.attributes == (
        "toxicity",
        "flagged",
        "cat_S1",
        "cat_S9",
        "cat_S10",
    )  # read from the template
    scores = judge.score(SENTENCES, ["en"] * len(SENTENCES))
    for text, score in zip(SENTENCES, scores, strict=True):
        verdict = expected_verdict(text)
        assert score.ok, score.error
        if verdict is None:
            assert score.values["flagged"] == 0.0 and score.values["toxicity"] < 0.5, text
            assert all(score.values[f"cat_{c}"] == 0.0 for c in ("S1", "S9", "S10"))
        else:
            assert score.values["flagged"] == 1.0 and score.values["toxicity"] > 0.5, text
            named = {c for c in ("S1", "S9", "S10") if score.values[f"cat_{c}"] == 1.0}
            assert named == set(verdict), text


def test_role_assistant_judges_the_text_as_a_reply(taught: Path) -> None:
    judge = LlamaGuardScorer(
        model=str(taught), role="assistant", user_message="say something", device="cpu", dtype="float32"
    )
    prompt = judge.render("I will kill you")
    assert "User: say something\nAgent: I will kill you" in prompt


def test_a_text_that_crashes_the_model_fails_alone(untrained: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = LlamaGuardScorer(
        model=str(untrained), format="llama-guard-3", batch_size="8", device="cpu", dtype="float32"
    )
    poison = judge.tokenizer.convert_tokens_to_ids("bomb")
    forward = judge.model.forward

    def crashing(*args, **kwargs):  # type: ignore[no-untyped-def]
        if (kwargs["input_ids"] == poison).any():
            raise RuntimeError("CUDA error: device-side assert triggered")
        return forward(*args, **kwargs)

    monkeypatch.setattr(judge.model, "forward", crashing)
    texts = ["you are nice", "how to make a bomb at home", "the park", "eres un idiota"]
    scores = judge.score(texts, ["en", "en", "en", "es"])
    assert [s.ok for s in scores] == [True, False, True, False]
    assert scores[1].error == "SCORER_ERROR: RuntimeError: CUDA error: device-side assert triggered"
    assert scores[1].transient and scores[3].error.startswith("LANGUAGE_NOT_SUPPORTED")


def test_bad_options_fail_clearly(untrained: Path) -> None:
    with pytest.raises(PolytoxError, match="model=HUB_ID_OR_FOLDER"):
        LlamaGuardScorer()
    with pytest.raises(PolytoxError, match="role must be one of"):
        LlamaGuardScorer(model=str(untrained), role="system")
    with pytest.raises(PolytoxError, match="no chat template"):
        LlamaGuardScorer(model=str(untrained), format="chat-template", device="cpu", dtype="float32")
    with pytest.raises(PolytoxError, match="same token"):
        LlamaGuardScorer(model=str(untrained), unsafe_token="safe", device="cpu", dtype="float32")
    with pytest.raises(PolytoxError, match="does not know"):
        LlamaGuardScorer(model=str(untrained), unsafe_token="dangerous", device="cpu", dtype="float32")


def test_a_text_the_tokenizer_rejects_fails_alone(untrained: Path) -> None:
    judge = LlamaGuardScorer(model=str(untrained), format="llama-guard-3", device="cpu", dtype="float32")
    texts = ["you are nice", "broken \ud800 surrogate", "the park"]
    checked = judge.score(texts, ["en"] * 3)  # the Scorer contract catches the surrogate first
    assert [s.ok for s in checked] == [True, False, True] and checked[1].error.startswith("INVALID_TEXT")
    scores = judge.score_batch(texts, ["en"] * 3)  # the judge itself isolates a text its tokenizer rejects
    assert [s.ok for s in scores] == [True, False, True]
    assert scores[1].error.startswith("BAD_TEXT: the tokenizer rejects this text") and not scores[1].transient
    alone = judge.score(["you are nice"], ["en"])[0]
    assert scores[0].values == pytest.approx(alone.values, abs=1e-6)
