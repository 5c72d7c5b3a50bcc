"""Label mapping, activation choice, length-sorted batch plans and Llama Guard prompts/answers (no models)."""

from __future__ import annotations

import pytest

from polytox.errors import PolytoxError
from polytox.scoring.batching import plan_batches
from polytox.scoring.labels import build_label_plan, choose_activation, normalize_label, parse_label_map
from polytox.scoring.llama_guard_prompt import (
    LLAMA_GUARD_1,
    LLAMA_GUARD_3,
    categories_in_prompt,
    parse_verdict,
    render_documented,
)

TOXIC_BERT = {0: "toxic", 1: "severe_toxic", 2: "obscene", 3: "threat", 4: "insult", 5: "identity_hate"}


def test_normalize_label_applies_detoxify_renames() -> None:
    assert [normalize_label(x) for x in ("toxic", "Severe Toxic", "identity-hate", "LABEL_1", "Insult")] == [
        "toxicity",
        "severe_toxicity",
        "identity_attack",
        "label_1",
        "insult",
    ]


@pytest.mark.parametrize(
    ("problem_type", "num_labels", "expected"),
    [
        ("multi_label_classification", 6, "sigmoid"),
        ("single_label_classification", 2, "softmax"),
        (None, 1, "sigmoid"),
        (None, 2, "softmax"),
        ("regression", 3, "none"),
    ],
)
def test_activation_follows_config_like_pipeline(
    problem_type: str | None, num_labels: int, expected: str
) -> None:
    assert choose_activation("auto", problem_type, num_labels) == expected
    assert choose_activation("sigmoid", "single_label_classification", 2) == "sigmoid"
    with pytest.raises(PolytoxError, match="activation must be"):
        choose_activation("relu", None, 2)


def test_multi_label_plan_keeps_every_output_toxicity_first() -> None:
    plan = build_label_plan(TOXIC_BERT, activation="sigmoid")
    assert plan.attributes == (
        "toxicity",
        "severe_toxicity",
        "obscene",
        "threat",
        "insult",
        "identity_attack",
    )
    assert plan.indices == (0, 1, 2, 3, 4, 5)
    kept = build_label_plan(TOXIC_BERT, activation="sigmoid", keep=["insult", "obscene"])
    assert (kept.attributes, kept.indices) == (("toxicity", "insult", "obscene"), (0, 4, 2))
    with pytest.raises(PolytoxError, match="not among"):
        build_label_plan(TOXIC_BERT, activation="sigmoid", keep=["flirtation"])


def test_binary_softmax_keeps_only_the_positive_class() -> None:
    plan = build_label_plan({0: "neutral", 1: "toxic"}, activation="softmax")
    assert (plan.attributes, plan.indices) == (("toxicity",), (1,))
    generic = build_label_plan({0: "LABEL_0", 1: "LABEL_1"}, activation="softmax")
    assert generic.indices == (1,)
    single = build_label_plan({0: "LABEL_0"}, activation="sigmoid")
    assert (single.attributes, single.indices) == (("toxicity",), (0,))
    # Sigmoid over two outputs: both are information, both are kept.
    assert build_label_plan({0: "neutral", 1: "toxic"}, activation="sigmoid").attributes == (
        "toxicity",
        "neutral",
    )


def test_ambiguous_outputs_fail_with_the_option_to_set() -> None:
    davidson = {0: "hate", 1: "offensive", 2: "neither"}
    with pytest.raises(PolytoxError, match="toxicity_label=NAME"):
        build_label_plan(davidson, activation="softmax")
    with pytest.raises(PolytoxError, match="toxicity_label=NAME"):
        build_label_plan({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, activation="softmax")
    plan = build_label_plan(davidson, activation="softmax", toxicity_label="offensive")
    assert dict(zip(plan.attributes, plan.indices, strict=True)) == {"toxicity": 1, "hate": 0, "neither": 2}


def test_label_map_renames_by_name_or_index_and_displaces_a_clash() -> None:
    plan = build_label_plan(TOXIC_BERT, activation="sigmoid", label_map="insult:toxicity, 2:profanity")
    mapping = dict(zip(plan.attributes, plan.indices, strict=True))
    assert mapping["toxicity"] == 4 and mapping["toxicity_orig"] == 0 and mapping["profanity"] == 2
    assert parse_label_map(" a:b ,, 3:c ") == {"a": "b", "3": "c"}
    with pytest.raises(PolytoxError, match="SRC:DST"):
        parse_label_map("nocolon")
    with pytest.raises(PolytoxError, match="no output called 'flirt'"):
        build_label_plan(TOXIC_BERT, activation="sigmoid", label_map="flirt:x")


def test_plan_batches_sorts_by_length_and_respects_both_limits() -> None:
    lengths = [5, 50, 7, 300, 12, 9, 48, 6]
    batches = plan_batches(lengths, max_batch_size=3, max_batch_tokens=200)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [3]  # the longest text alone: 300 tokens is over the budget already
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= 200
    widths = [max(lengths[i] for i in b) for b in batches]
    assert widths == sorted(widths, reverse=True)  # longest first
    assert plan_batches([4, 4, 4], max_batch_size=2) == [[0, 1], [2]]
    assert plan_batches([], max_batch_size=2) == []


def test_documented_llama_guard_prompts_follow_the_model_cards() -> None:
    lg1 = render_documented("llama-guard-1", "hello there", "user", bos="<s>")
    assert lg1.startswith("<s>[INST] Task: Check if there is unsafe content in 'User' messages")
    assert lg1.endswith("a comma-separated list of violated categories. [/INST]")
    assert "User: hello there" in lg1 and "O3: Criminal Planning." in lg1
    assert categories_in_prompt(lg1) == LLAMA_GUARD_1
    lg3 = render_documented("llama-guard-3", "a reply", "assistant", user_message="a question")
    assert "ONLY THE LAST Agent message" in lg3 and "User: a question\n\nAgent: a reply" in lg3
    assert lg3.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert categories_in_prompt(lg3) == LLAMA_GUARD_3
    assert len(categories_in_prompt(render_documented("llama-guard-2", "x", "user"))) == 11
    assert categories_in_prompt("no categories here") == ()


def test_parse_verdict_reads_the_first_word_and_the_codes() -> None:
    assert parse_verdict("safe") == parse_verdict(" safe\n") and parse_verdict("safe").unsafe is False
    v = parse_verdict("unsafe\nS1,S10")
    assert v.unsafe is True and v.categories == ("S1", "S10")
    assert parse_verdict("unsafe S1 , S9 , S1").categories == ("S1", "S9")
    assert parse_verdict("unsafe\nO3", known=("S1",)).categories == ()
    assert parse_verdict("I cannot answer").unsafe is None
    assert parse_verdict("").unsafe is None


def test_auto_dtype_uses_bfloat16_only_where_the_cpu_computes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from polytox._util import torch_device

    monkeypatch.setattr(torch_device, "cpu_has_native_bf16", lambda: True)
    assert torch_device.pick_dtype("auto", "cpu") is torch.bfloat16
    # generation keeps float32 on every CPU: its sampled tokens never depend on the processor
    assert torch_device.pick_dtype("auto", "cpu", cpu_bf16=False) is torch.float32
    assert torch_device.pick_dtype("bfloat16", "cpu", cpu_bf16=False) is torch.bfloat16
    monkeypatch.setattr(torch_device, "cpu_has_native_bf16", lambda: False)
    assert torch_device.pick_dtype("auto", "cpu") is torch.float32
    assert torch_device.pick_dtype("float16", "cpu") is torch.float16
    assert torch_device.pick_device("cpu") == "cpu"
    with pytest.raises(PolytoxError, match="dtype must be one of"):
        torch_device.pick_dtype("int4", "cpu")


def test_plan_batches_keeps_padding_bounded() -> None:
    lengths = [500, 480, 40, 38, 12, 10, 9, 5]
    batches = plan_batches(lengths, max_batch_size=16, max_batch_tokens=None)
    assert batches == [[0, 1], [2, 3], [4, 5, 6, 7]]  # 40 is never padded to 500; 5 is within 8 tokens of 12
    for batch in batches:
        width = max(lengths[i] for i in batch)
        assert all(width - lengths[i] <= max(8, 0.25 * width) for i in batch)
    assert plan_batches(lengths, max_batch_size=16, max_padding=None) == [list(range(8))]
