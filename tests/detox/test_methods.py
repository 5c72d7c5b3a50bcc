"""Decoding-time methods on tiny random models: spec identity, determinism, exact logit arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.detox.corpus import Corpus  # noqa: E402
from polytox.detox.methods import METHODS, canonical_detox, check_detox, method_options, parse_detox  # noqa: E402
from polytox.errors import PolytoxError  # noqa: E402
from polytox.generation.hf import TransformersGenerator  # noqa: E402
from polytox.generation.hf_cache import cache_of  # noqa: E402
from polytox.spec import GenerationSpec, spec_from_flat  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

from ..tiny_hf import one_torch_thread  # noqa: E402
from ..tiny_models import CORPUS, make_tiny_lm  # noqa: E402

PROMPTS = [Prompt(id="a", text="the weather this morning was", lang="en"),
           Prompt(id="b", text="shut up", lang="en")]


def requests(k: int) -> list[GenerationRequest]:
    return [GenerationRequest(p, s, derive_seed(0, p.id, s)) for p in PROMPTS for s in range(k)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp("lm"), arch="llama")


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp("lm2"), arch="llama", seed=1)


def gen(path: Path, detox: str = "", **kw: object) -> TransformersGenerator:
    base = {"model": str(path), "samples": 3, "max_new_tokens": 6, "batch_size": 2, "chat_template": "never",
            "detox": detox}
    base.update(kw)
    return TransformersGenerator(GenerationSpec(**base))  # type: ignore[arg-type]


def texts(g: TransformersGenerator, k: int = 3) -> list[str | None]:
    with one_torch_thread():
        return [x.text for x in g.generate(requests(k))]


def test_detox_option_parsing_and_spec_identity() -> None:
    assert canonical_detox("Vocab_Shift: beta=3 ,path=/x") == "vocab-shift:beta=3,path=/x"
    assert parse_detox("word-filter")[1] == {}
    with pytest.raises(PolytoxError, match="unknown --detox method"):
        parse_detox("magic")
    with pytest.raises(PolytoxError, match="unknown option"):
        parse_detox("vocab-shift:strength=3")
    # a required option is a row's mark, checked before any work (``detox.check``), in the words it always had
    with pytest.raises(PolytoxError, match=r"^--detox dexperts needs anti=\.\.\. \(an LM trained on toxic text\)$"):
        check_detox("dexperts:expert=/x")
    with pytest.raises(PolytoxError, match=r"needs head=\.\.\."):
        method_options("pplm", {"head": ""})
    assert [k for k, row in METHODS["dexperts"][2].items() if row.required] == ["expert", "anti"]
    beta = METHODS["vocab-shift"][2]["beta"].default
    assert beta == 3.0 and method_options("vocab-shift", {"path": "/x"}) == {"path": "/x", "beta": beta}
    plain = spec_from_flat({"model": "tiny"})
    a = spec_from_flat({"model": "tiny", "detox": "vocab-shift:path=/x,beta=3"})
    b = spec_from_flat({"model": "tiny", "detox": "vocab-shift:beta=3,path=/x"})
    c = spec_from_flat({"model": "tiny", "detox": "vocab-shift:beta=2,path=/x"})
    assert "detox" not in plain.identity()["generation"]  # runs without --detox keep their old hash
    assert a.spec_hash() == b.spec_hash() != c.spec_hash() != plain.spec_hash()
    # the fluency model is computed afterwards from stored generations: not part of the identity
    assert spec_from_flat({"model": "tiny", "fluency_model": "gpt2"}).spec_hash() == plain.spec_hash()
    assert type(a).from_dict(a.to_dict()) == a


def test_vocab_shift_adds_beta_times_the_nontoxic_column(tiny: Path, tmp_path: Path) -> None:
    from safetensors.torch import save_file

    g0 = gen(tiny, temperature=0.0)
    vocab = g0.model.config.vocab_size
    W = torch.zeros(vocab, 2)
    target = g0.tokenizer(" cold", add_special_tokens=False)["input_ids"][0]
    W[target, 0] = 10.0  # non-toxic column: boosts "cold"
    W[5, 1] = 50.0  # toxic column: must be ignored
    save_file({"W": W}, str(tmp_path / "vocab_shift.safetensors"))
    g = gen(tiny, f"vocab-shift:path={tmp_path},beta=3", temperature=0.0)
    logits = torch.randn(2, vocab)
    assert torch.allclose(g.detox.adjust(logits, [[1], [2]]) - logits, 3.0 * W[:, 0].expand(2, -1))  # type: ignore[union-attr]
    out = [x.text for x in g.generate(requests(1))]
    assert out == [g.tokenizer.decode([target] * 6)] * 2  # greedy: the boosted token every step
    assert texts(g0, 1) != out


def test_adjusters_keep_batch_invariance_and_seeds(tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "list.txt").write_text("idiot\nshut\n")
    for detox in ("", f"word-filter:list={tmp_path / 'list.txt'}"):
        one = texts(gen(tiny, detox, batch_size=1))
        two = texts(gen(tiny, detox, batch_size=2))
        assert one == two
    filtered = texts(gen(tiny, f"word-filter:list={tmp_path / 'list.txt'}"), k=8)
    assert not any(w in (t or "").split() for t in filtered for w in ("idiot", "shut"))


def test_dexperts_is_base_plus_alpha_times_expert_minus_anti(tiny: Path, other: Path) -> None:
    same = gen(tiny, f"dexperts:expert={other},anti={other},alpha=2")
    assert texts(same) == texts(gen(tiny))  # expert == anti-expert: no change at all
    g = gen(tiny, f"dexperts:expert={tiny},anti={other},alpha=2")
    hist = [[3, 4, 5], [6, 7]]
    logits = torch.zeros(2, g.model.config.vocab_size)
    with torch.inference_mode():
        e = torch.stack([g.model(input_ids=torch.tensor([h])).logits[0, -1] for h in hist])
        a_model = g.detox.anti  # type: ignore[union-attr]
        a = torch.stack([a_model(input_ids=torch.tensor([h])).logits[0, -1] for h in hist])
        got = g.detox.adjust(logits, hist)  # type: ignore[union-attr]
    assert torch.allclose(got, 2.0 * (e - a), atol=1e-4)


def test_dexperts_cache_matches_fresh_reads(tiny: Path, other: Path) -> None:
    """The experts' KV cache gives the logits of a fresh read of each history, step after step: rows that
    grow, a row that stops growing (finished), rows dropped by compaction, then an unrelated batch."""
    g = gen(tiny, f"dexperts:expert={tiny},anti={other},alpha=1")
    d = g.detox
    steps = [[[3, 4, 5], [3, 4, 5], [6, 7]],
             [[3, 4, 5, 8], [3, 4, 5, 9], [6, 7, 9]],
             [[3, 4, 5, 8, 10], [3, 4, 5, 9], [6, 7, 9, 11]],  # row 1 finished
             [[3, 4, 5, 8, 10, 12], [6, 7, 9, 11, 2]],  # row 1 dropped
             [[9, 9], [1, 2, 3, 4, 5, 6, 7]]]  # a new batch: a fresh prefill
    zero = torch.zeros(3, g.model.config.vocab_size)
    prefills: list[int] = []
    fresh = d.expert_logits._prefill  # type: ignore[union-attr]
    d.expert_logits._prefill = lambda keys: prefills.append(len(keys)) or fresh(keys)  # type: ignore[union-attr]
    with torch.inference_mode():
        for hist in steps:
            got = d.adjust(zero[: len(hist)], hist)  # type: ignore[union-attr]
            want = torch.stack([g.model(input_ids=torch.tensor([h])).logits[0, -1]
                                - d.anti(input_ids=torch.tensor([h])).logits[0, -1] for h in hist])  # type: ignore[union-attr]
            assert torch.allclose(got, want, atol=1e-4), hist
    assert prefills == [3, 2]  # only the first step of each batch reads whole histories
    assert d.expert_logits.histories == [tuple(h) for h in steps[-1]]  # type: ignore[union-attr]
    d.adjust(zero[:2], steps[-1], last=True)  # type: ignore[union-attr]
    assert d.expert_logits.cache is None  # the last step frees both caches  # type: ignore[union-attr]


def test_dexperts_refuses_another_tokenizer(tiny: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    path = make_tiny_lm(tmp_path / "m", arch="llama")
    tok = AutoTokenizer.from_pretrained(path)
    tok.add_tokens(["zzzz"])
    tok.save_pretrained(path)
    with pytest.raises(PolytoxError, match="does not share"):
        gen(tiny, f"dexperts:expert={path},anti={path}")


def _corpus() -> Corpus:
    docs = [(t, 1 if any(w in t for w in ("idiot", "shut")) else 0) for t in CORPUS]
    return Corpus(train=docs, heldout=docs[:4], stats={"test": True})


def test_train_atcon_then_generate_with_the_attribute_token(tiny: Path, tmp_path: Path) -> None:
    from polytox.detox.train import TrainConfig, train_lm

    with one_torch_thread():
        out = train_lm(_corpus(), TrainConfig(base_model=str(tiny), out=str(tmp_path / "atcon"), max_steps=2,
                                              batch_size=4, save_steps=1), "atcon")
    meta = json.loads((out / "detox.json").read_text())
    assert meta["training"]["steps"] == 2 and meta["subset"] == "both"
    g = gen(out, "atcon")
    token = g.tokenizer.convert_tokens_to_ids("<|nontoxic|>")
    assert g.encode(PROMPTS[0])[0][0] == token
    toxic = g.tokenizer.convert_tokens_to_ids("<|toxic|>")
    logits = torch.zeros(2, len(g.tokenizer))
    banned = g.detox.adjust(logits, [[1], [2]])  # type: ignore[union-attr]
    assert torch.isinf(banned[:, [token, toxic]]).all() and torch.isfinite(banned[:, :token]).all()
    emb = g.model.get_input_embeddings().weight
    assert not torch.allclose(emb[token], emb[toxic], atol=1e-3)  # two distinct rows, not mean-resized copies
    assert all(t is not None for t in texts(g))
    with pytest.raises(PolytoxError, match="no '<\\|nontoxic\\|>' token"):
        gen(tiny, "atcon")


def test_dapt_checkpoints_resume(tiny: Path, tmp_path: Path) -> None:
    from polytox.detox.train import TrainConfig, train_lm

    cfg = TrainConfig(base_model=str(tiny), out=str(tmp_path / "dapt"), max_steps=2, batch_size=2, save_steps=1)
    with one_torch_thread():
        train_lm(_corpus(), cfg, "dapt", "toxic")
        cfg.max_steps = 3
        train_lm(_corpus(), cfg, "dapt", "toxic")
    meta = json.loads((tmp_path / "dapt" / "detox.json").read_text())
    assert meta["training"]["resumed_from"].endswith("checkpoint-2")
    assert meta["training"]["steps"] == 3 and meta["subset"] == "toxic"
    assert meta["n_documents"] == sum(1 for t in CORPUS if "idiot" in t or "shut" in t)


def test_dapt_with_lora_merges_adapters_into_a_plain_checkpoint(tiny: Path, tmp_path: Path) -> None:
    """``--lora`` trains PEFT adapters and saves a merged model that ``--model`` loads like any other."""
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from polytox.detox.train import TrainConfig, train_lm

    cfg = TrainConfig(base_model=str(tiny), out=str(tmp_path / "lora"), max_steps=3, batch_size=2, lora=True,
                      lr=1e-2)
    with one_torch_thread():
        train_lm(_corpus(), cfg, "dapt", "toxic")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora")
    base = AutoModelForCausalLM.from_pretrained(tiny)
    assert not any("lora" in name for name in merged.state_dict())  # adapters merged, not saved beside
    changed = [n for n, w in base.state_dict().items() if not torch.equal(w, merged.state_dict()[n])]
    assert changed and all(n.endswith(("proj.weight", "lm_head.weight")) for n in changed), changed
    assert all(t is not None for t in texts(gen(tmp_path / "lora")))


def test_vocab_shift_and_pplm_head_training(tiny: Path, tmp_path: Path) -> None:
    from polytox.detox.pplm import load_head
    from polytox.detox.train import TrainConfig, train_pplm_head, train_vocab_shift
    from polytox.detox.vocab_shift import load_shift

    with one_torch_thread():
        train_vocab_shift(_corpus(), TrainConfig(base_model=str(tiny), out=str(tmp_path / "vs"), max_steps=3,
                                                 batch_size=4))
        train_pplm_head(_corpus(), TrainConfig(base_model=str(tiny), out=str(tmp_path / "head"), max_steps=3,
                                               batch_size=4))
    W = load_shift(tmp_path / "vs")
    assert W.shape[1] == 2 and float(W.abs().sum()) > 0  # learned from zero
    assert not torch.allclose(W[:, 0], W[:, 1])
    assert load_head(tmp_path / "head").out_features == 2
    meta = json.loads((tmp_path / "head" / "detox.json").read_text())
    assert 0.0 <= meta["training"]["heldout_accuracy"] <= 1.0

    # PPLM: own decoding loop, seeded and deterministic; steering changes the text
    pplm = f"pplm:head={tmp_path / 'head'},iterations=2,step_size=0.5"
    first, again = texts(gen(tiny, pplm, max_new_tokens=4)), texts(gen(tiny, pplm, max_new_tokens=4))
    assert first == again and all(t is not None for t in first)
    assert first != texts(gen(tiny, f"pplm:head={tmp_path / 'head'},iterations=0,gm_scale=0", max_new_tokens=4))


def test_pplm_look_ahead_reads_the_expected_next_embedding(tiny: Path, tmp_path: Path) -> None:
    """Horizon 1 (Dathathri et al.): a sure next token makes the look-ahead state that of reading it."""
    from safetensors.torch import save_file

    g0 = gen(tiny)
    hidden = g0.model.config.hidden_size
    save_file({"weight": torch.randn(2, hidden), "bias": torch.zeros(2)}, str(tmp_path / "pplm_head.safetensors"))
    g = gen(tiny, f"pplm:head={tmp_path},iterations=1")
    d, model = g.detox, g.model
    assert d.describe()["horizon"] == 1  # type: ignore[union-attr]
    with torch.inference_mode():
        past = cache_of(model(input_ids=torch.tensor([[3, 4, 5]]), use_cache=True))
        keys = [layer.keys for layer in past.layers]
        values = [layer.values for layer in past.layers]
        sure = torch.nn.functional.one_hot(torch.tensor([7]), model.config.vocab_size).float()
        got = d._look_ahead(model, sure, keys, values)  # type: ignore[union-attr]
        want = model(input_ids=torch.tensor([[3, 4, 5, 7]]), output_hidden_states=True).hidden_states[-1][:, -1]
    assert torch.allclose(got, want, atol=1e-5)
    h0 = gen(tiny, f"pplm:head={tmp_path},iterations=2,step_size=1,horizon=0").detox
    h1 = gen(tiny, f"pplm:head={tmp_path},iterations=2,step_size=1").detox
    history = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 10]])
    a, b = h0._steered_logits(model, history), h1._steered_logits(model, history)  # type: ignore[union-attr]
    assert torch.isfinite(a).all() and not torch.allclose(a, b)  # the look-ahead changes the gradient
    with pytest.raises(PolytoxError, match=r"^--detox pplm option horizon='-1': horizon takes an integer >= 0$"):
        gen(tiny, f"pplm:head={tmp_path},horizon=-1")


def test_backends_without_a_logits_hook_refuse_detox() -> None:
    with pytest.raises(PolytoxError, match="transformers backend"):
        spec_from_flat({"model": "fake", "detox": "word-filter"})
