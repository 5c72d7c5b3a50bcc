"""The transformers backend on tiny random models: exactness against ``generate``, batch invariance,
truncation, chat templates, EOS handling, and the sampler's distribution."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.generation.hf import TransformersGenerator  # noqa: E402
from polytox.generation.sampling import sample_next  # noqa: E402
from polytox.spec import GenerationSpec  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

from .tiny_models import make_tiny_lm  # noqa: E402

PROMPTS = [
    Prompt(id="a", text="the weather this morning was", lang="en"),
    Prompt(id="b", text="shut up", lang="en"),
    Prompt(id="c", text="my neighbour told me that the train was late and the city council", lang="en"),
]


def requests(prompts: list[Prompt], k: int, seed: int = 0) -> list[GenerationRequest]:
    return [GenerationRequest(p, s, derive_seed(seed, p.id, s)) for p in prompts for s in range(k)]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp(request.param), arch=request.param)


def spec_for(path: Path, **kw: object) -> GenerationSpec:
    base = {"model": str(path), "samples": 3, "max_new_tokens": 8, "temperature": 1.0, "top_p": 0.9,
            "batch_size": 3, "chat_template": "never"}
    base.update(kw)
    return GenerationSpec(**base)  # type: ignore[arg-type]


def test_greedy_matches_generate_with_left_padding(tiny: Path) -> None:
    """Batched prefill + shared cache + lean loop == one plain greedy generate() per prompt."""
    gen = TransformersGenerator(spec_for(tiny, temperature=0.0, samples=2))
    outs = gen.generate(requests(PROMPTS, 2))
    for p in PROMPTS:
        ids, _ = gen.encode(p)
        ref = gen.model.generate(input_ids=torch.tensor([ids]),
                                 attention_mask=torch.ones(1, len(ids), dtype=torch.long), do_sample=False,
                                 max_new_tokens=8, pad_token_id=gen.pad_id)
        new = [t for t in ref[0, len(ids):].tolist() if t not in gen.eos_ids]
        expected = gen.tokenizer.decode(new, skip_special_tokens=True)
        mine = [o for o in outs if o.prompt_id == p.id]
        assert [o.text for o in mine] == [expected, expected]


def test_sampling_is_batch_invariant_and_seeded(tiny: Path) -> None:
    reqs = requests(PROMPTS, 4)
    one = TransformersGenerator(spec_for(tiny, batch_size=1, samples=4)).generate(reqs)
    three = TransformersGenerator(spec_for(tiny, batch_size=3, samples=4)).generate(list(reversed(reqs)))
    by_key = {(g.prompt_id, g.sample_index): g.text for g in three}
    assert [g.text for g in one] == [by_key[(g.prompt_id, g.sample_index)] for g in one]
    texts = {g.text for g in one if g.prompt_id == "a"}
    assert len(texts) > 1, "different sample indices must draw different continuations"
    other_seed = TransformersGenerator(spec_for(tiny, batch_size=3, samples=4)).generate(requests(PROMPTS, 4, seed=1))
    assert [g.text for g in other_seed] != [g.text for g in one]


def test_only_continuation_is_decoded_and_counts(tiny: Path) -> None:
    gen = TransformersGenerator(spec_for(tiny, max_new_tokens=5))
    for g in gen.generate(requests(PROMPTS, 3)):
        assert g.error is None
        assert 0 <= g.n_tokens <= 5
        assert g.finish_reason in ("stop", "length")
        assert g.finish_reason == "stop" or g.n_tokens == 5
        assert not (g.text or "").startswith("the weather this morning was")


def test_long_prompt_is_left_truncated_and_flagged(tmp_path: Path) -> None:
    path = make_tiny_lm(tmp_path / "m", arch="llama", context=32)
    gen = TransformersGenerator(spec_for(path, max_new_tokens=8))
    long = Prompt(id="long", text=" ".join(["the weather this morning was cold"] * 20), lang="en")
    ids, truncated = gen.encode(long)
    assert truncated and len(ids) == 32 - 8
    full = gen.tokenizer(long.text)["input_ids"]
    assert ids == full[-24:]
    outs = gen.generate(requests([long, PROMPTS[1]], 2))
    assert [o.prompt_truncated for o in outs] == [True, True, False, False]
    assert all(o.error is None for o in outs)


def test_chat_template_wraps_the_prompt_as_one_user_message(tmp_path: Path) -> None:
    path = make_tiny_lm(tmp_path / "chat", arch="gpt2", chat=True)
    auto = TransformersGenerator(spec_for(path, chat_template="auto"))
    never = TransformersGenerator(spec_for(path, chat_template="never"))
    ids, _ = auto.encode(PROMPTS[0])
    rendered = auto.tokenizer.decode(ids)
    assert rendered.startswith("<|user|>") and rendered.rstrip().endswith("<|assistant|>")
    assert PROMPTS[0].text in rendered
    raw, _ = never.encode(PROMPTS[0])
    assert never.tokenizer.decode(raw) == PROMPTS[0].text
    assert auto.describe()["chat_template"] is True and never.describe()["chat_template"] is False


def test_eos_stops_a_row_and_is_not_decoded(tiny: Path) -> None:
    gen = TransformersGenerator(spec_for(tiny, temperature=0.0, samples=1))
    ids, _ = gen.encode(PROMPTS[0])
    with torch.inference_mode():
        first = int(gen.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
    gen.eos_ids = [first]  # the greedy first token now ends the sequence at once
    out = gen.generate(requests([PROMPTS[0]], 1))[0]
    assert out.finish_reason == "stop" and out.n_tokens == 0 and out.text == ""


def test_empty_prompt_starts_from_bos(tiny: Path) -> None:
    gen = TransformersGenerator(spec_for(tiny))
    ids, truncated = gen.encode(Prompt(id="u", text="", lang="en"))
    assert ids == [gen.tokenizer.bos_token_id] and not truncated
    outs = gen.generate(requests([Prompt(id="u", text="", lang="en")], 2))
    assert all(o.error is None and o.n_tokens > 0 for o in outs)


def test_sampler_matches_the_filtered_distribution() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    u = torch.from_numpy(np.random.default_rng(0).random(20000)).float()
    rows = logits.expand(len(u), -1)
    full = np.bincount(sample_next(rows, u, 1.0, 1.0, 0).numpy(), minlength=4) / len(u)
    np.testing.assert_allclose(full, [0.5, 0.3, 0.15, 0.05], atol=0.015)
    nucleus = np.bincount(sample_next(rows, u, 1.0, 0.75, 0).numpy(), minlength=4) / len(u)
    np.testing.assert_allclose(nucleus, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=0.015)
    topk = np.bincount(sample_next(rows, u, 1.0, 1.0, 1).numpy(), minlength=4) / len(u)
    np.testing.assert_allclose(topk, [1, 0, 0, 0])
    cold = np.bincount(sample_next(rows, u, 0.5, 1.0, 0).numpy(), minlength=4) / len(u)
    p = np.array([0.5, 0.3, 0.15, 0.05]) ** 2
    np.testing.assert_allclose(cold, p / p.sum(), atol=0.015)


def test_nucleus_candidates_and_full_sort_agree() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 5000, generator=gen) * 0.3  # flat: nuclei wider than a small candidate set
    u = torch.rand(64, generator=gen)
    exact = sample_next(logits, u, 1.0, 0.9, 0, method="sort")
    assert torch.equal(sample_next(logits, u, 1.0, 0.9, 0, method="candidates", candidates=16), exact)


def test_describe_records_device_and_dtype(tiny: Path) -> None:
    info = TransformersGenerator(dataclasses.replace(spec_for(tiny))).describe()
    assert info["device"] == "cpu" and info["dtype"] == "torch.float32" and info["context"] == 128
