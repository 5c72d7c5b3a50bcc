"""Every detoxification method moves a model the way its paper says, on a corpus whose toxicity is known.

A tiny Llama is pretrained here on both sides of ``synthetic.documents`` (toxic side: its own vocabulary
and style token; clean side: another), so it samples the toxic vocabulary at a measurable rate. Each
method is then trained with polytox's own trainers and run through the transformers generator:

- DAPT on the toxic side raises the sampled rate, on the non-toxic side lowers it (RTP §5.1);
- ATCON's ``<|toxic|>`` raises and ``<|nontoxic|>`` lowers the toxic vocabulary's probability, and
  ``--detox atcon`` samples it less than the base model (RTP §5.1, B.3);
- VOCAB-SHIFT's learned non-toxic column ranks the toxic vocabulary below every other token, including
  tokens no document uses, and ``beta = 3`` samples it less (RTP §5.2, B.3);
- PPLM's head separates held-out documents and steering samples the vocabulary less than the same loop
  without steering (Dathathri et al. 2020);
- DExperts with the two DAPT models as expert / anti-expert samples it less (Liu et al. 2021);
- the word filter never samples a listed word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.detox.corpus import NONTOXIC, Corpus  # noqa: E402
from polytox.detox.train import TrainConfig, pack_blocks, train_lm, train_pplm_head, train_vocab_shift  # noqa: E402
from polytox.generation.hf import TransformersGenerator  # noqa: E402
from polytox.spec import GenerationSpec  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

from ..tiny_hf import one_torch_thread  # noqa: E402
from . import synthetic as S  # noqa: E402

SAMPLES = 6


def corpus(n_per_side: int = 60) -> Corpus:
    docs = S.documents(n_per_side)
    held = S.documents(10, seed=99)
    return Corpus(train=docs, heldout=held, stats={"synthetic": True})


def cfg(base: Path, out: Path, **kw: object) -> TrainConfig:
    args: dict = {"base_model": str(base), "out": str(out), "batch_size": 8, "max_length": 64, "save_steps": 10_000,
                  "lr": 3e-3, "max_steps": 60}
    args.update(kw)
    return TrainConfig(**args)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pretrained base and the models every test reads (trained once per module)."""
    root = tmp_path_factory.mktemp("synthetic")
    raw = S.untrained_lm(root / "raw")
    both = Corpus(train=[(t, NONTOXIC) for t, _ in corpus().train], heldout=[], stats={})
    with one_torch_thread():
        base = train_lm(both, cfg(raw, root / "base", max_steps=150, lr=1e-2), "dapt", "nontoxic")
        out = {"base": base}
        for side in ("toxic", "nontoxic"):
            out[side] = train_lm(corpus(), cfg(base, root / f"dapt-{side}", max_steps=40), "dapt", side)
        out["atcon"] = train_lm(corpus(), cfg(base, root / "atcon", max_steps=200, lr=1e-2), "atcon")
    return out


def rate(model: Path, detox: str = "", **kw: object) -> float:
    spec = {"model": str(model), "samples": SAMPLES, "max_new_tokens": 8, "batch_size": 6, "chat_template": "never",
            "detox": detox, **kw}
    prompts = [Prompt(id=f"p{i}", text=t, lang="en") for i, t in enumerate(S.PROMPTS)]
    reqs = [GenerationRequest(p, s, derive_seed(0, p.id, s)) for p in prompts for s in range(SAMPLES)]
    with one_torch_thread():
        gens = TransformersGenerator(GenerationSpec(**spec)).generate(reqs)  # type: ignore[arg-type]
    assert all(g.error is None for g in gens)
    return S.toxic_rate([g.text for g in gens])


def test_packing_concatenates_documents_into_full_blocks() -> None:
    docs = [[5, 6, 1], [7, 1], [8, 9, 10, 11, 1]]
    blocks = pack_blocks(docs, 4, label=1)
    assert [b["input_ids"] for b in blocks] == [[5, 6, 1, 7], [1, 8, 9, 10], [11, 1]]
    assert {b["label"] for b in blocks} == {1}
    assert pack_blocks([[5], [1]], 4)[0]["input_ids"] == [5, 1]


def test_base_model_samples_both_sides(models: dict[str, Path]) -> None:
    base = rate(models["base"])
    assert 0.08 < base < 0.5, base  # the signal each method must move
    meta = json.loads((models["toxic"] / "detox.json").read_text())
    assert meta["n_blocks"] < meta["n_documents"]  # documents were packed, not one padded row each


def test_dapt_moves_the_toxic_rate_both_ways(models: dict[str, Path]) -> None:
    base, toxic, clean = rate(models["base"]), rate(models["toxic"]), rate(models["nontoxic"])
    assert toxic > base * 1.3, (toxic, base)
    assert clean < base / 3, (clean, base)


def test_atcon_attribute_tokens_pull_in_opposite_directions(models: dict[str, Path]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = models["atcon"]
    model, tok = AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    base = AutoModelForCausalLM.from_pretrained(models["base"]).eval()
    nontoxic, toxic = S.word_ids(tok, ["<|nontoxic|>", "<|toxic|>"])
    words = [*S.TOXIC_WORDS, S.STYLE[1]]
    with one_torch_thread():
        before = S.next_token_mass(base, tok, S.PROMPTS, words)  # the model ATCON started from
        up = S.next_token_mass(model, tok, S.PROMPTS, words, [toxic])
        down = S.next_token_mass(model, tok, S.PROMPTS, words, [nontoxic])
    assert up > before * 1.2 and down < before * 0.95, (down, before, up)  # opposite directions
    emb = model.get_input_embeddings().weight
    assert not torch.allclose(emb[nontoxic], emb[toxic], atol=1e-2)  # two distinct tokens, not two copies
    # sampled end to end through --detox atcon: <|nontoxic|> below the base model, <|toxic|> above it
    base = rate(models["base"])
    assert rate(path, "atcon") < base * 0.75 < base * 1.5 < rate(path, "atcon:token=<|toxic|>")


def test_vocab_shift_column_ranks_the_toxic_vocabulary_lowest(models: dict[str, Path], tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from polytox.detox.vocab_shift import load_shift

    with one_torch_thread():
        out = train_vocab_shift(corpus(), cfg(models["base"], tmp_path / "vs", lr=0.1, max_steps=300))
    W = load_shift(out)
    tok = AutoTokenizer.from_pretrained(models["base"])
    bad = set(S.word_ids(tok, [*S.TOXIC_WORDS, S.STYLE[1]]))
    column = W[:, 0]
    lowest = set(column.argsort()[: len(bad)].tolist())
    assert lowest == bad, sorted(tok.convert_ids_to_tokens(sorted(lowest)))
    unused = S.word_ids(tok, S.UNUSED_WORDS)
    assert float(column[list(bad)].max()) < float(column[unused].min())  # not "whatever the corpus lacks"
    assert float(column[S.word_ids(tok, S.CLEAN_WORDS)].min()) > float(column[unused].max())
    assert rate(models["base"], f"vocab-shift:path={out}") < rate(models["base"]) / 2


def test_pplm_head_separates_the_sides_and_steering_avoids_the_vocabulary(models: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    with one_torch_thread():
        out = train_pplm_head(corpus(), cfg(models["base"], tmp_path / "head", lr=1e-2, max_steps=60))
    meta = json.loads((out / "detox.json").read_text())
    assert meta["training"]["heldout_accuracy"] >= 0.9
    head = f"head={out},step_size=0.5,iterations=3,top_k=0"
    control = rate(models["base"], f"pplm:{head.replace('iterations=3', 'iterations=0')},gm_scale=0")
    steered = rate(models["base"], f"pplm:{head}")
    assert steered < control * 0.6, (steered, control)


def test_dexperts_steers_away_with_the_dapt_experts(models: dict[str, Path]) -> None:
    steered = rate(models["base"], f"dexperts:expert={models['nontoxic']},anti={models['toxic']}")
    assert steered < rate(models["base"]) / 3


def test_word_filter_never_samples_a_listed_word(models: dict[str, Path], tmp_path: Path) -> None:
    words = tmp_path / "list.txt"
    words.write_text("\n".join([*S.TOXIC_WORDS, S.STYLE[1]]) + "\n")
    assert rate(models["base"], f"word-filter:list={words}") == 0.0
