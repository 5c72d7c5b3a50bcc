"""The vLLM backend's request and parameter construction, against a stand-in ``vllm.LLM`` (no vLLM here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox import registry
from polytox.errors import MissingDependencyError, PolytoxError
from polytox.generation.prompting import (
    PromptTooLongError,
    encode_prompt,
    start_token_ids,
    wants_chat_template,
)
from polytox.generation.vllm_backend import (
    VLLMGenerator,
    api_seed,
    llm_kwargs,
    parse_options,
    plan_requests,
    sampling_kwargs,
)
from polytox.runner import execute_run as evaluate
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import GenerationRequest, Prompt, derive_seed

from .scale_helpers import WORDS, StandInLLM, StandInSamplingParams, tiny_tokenizer


def gen_spec(**kw: Any) -> GenerationSpec:
    base: dict[str, Any] = {"model": "org/tiny", "backend": "vllm", "samples": 3, "max_new_tokens": 4,
                            "temperature": 0.7, "top_p": 1.0}
    base.update(kw)
    return GenerationSpec(**base)


def make(spec: GenerationSpec, tokenizer: Any = None, engine_max_len: int = 12) -> tuple[VLLMGenerator, Any]:
    factory = StandInLLM.factory(tokenizer or tiny_tokenizer(), engine_max_len)
    gen = VLLMGenerator(spec, llm_cls=factory, sampling_params_cls=StandInSamplingParams)
    return gen, factory.made[0]


def requests_for(prompts: list[Prompt], k: int, seed: int = 0) -> list[GenerationRequest]:
    return [GenerationRequest(p, i, derive_seed(seed, p.id, i)) for p in prompts for i in range(k)]


# ---- prompt encoding (shared with the transformers backend) -----------------------------------------
def test_empty_prompt_is_the_start_token_alone_and_never_chat() -> None:
    tok = tiny_tokenizer(chat=True)
    assert start_token_ids(tok) == [WORDS.index("<s>")]
    assert encode_prompt(tok, "", chat=True, max_prompt_tokens=5).ids == [WORDS.index("<s>")]
    no_bos = tiny_tokenizer(bos=False)  # GPT-2 style: <|endoftext|> is the EOS
    assert start_token_ids(no_bos) == [WORDS.index("</s>")]


def test_raw_prompt_is_truncated_from_the_left_and_flagged() -> None:
    tok = tiny_tokenizer()
    text = "the cat sat on a mat hello world"
    full = encode_prompt(tok, text, chat=False, max_prompt_tokens=None)
    assert not full.truncated and len(full.ids) == 8
    cut = encode_prompt(tok, text, chat=False, max_prompt_tokens=3)
    assert cut.truncated and tok.decode(cut.ids) == "mat hello world"


def test_chat_template_renders_user_message_and_truncates_content_not_template() -> None:
    tok = tiny_tokenizer(chat=True)
    assert wants_chat_template("auto", tok) and not wants_chat_template("never", tok)
    assert not wants_chat_template("auto", tiny_tokenizer())
    with pytest.raises(PolytoxError, match="no chat template"):
        wants_chat_template("always", tiny_tokenizer())
    ids = encode_prompt(tok, "the cat sat on a mat", chat=True, max_prompt_tokens=None)
    assert tok.decode(ids.ids) == "<|user|> the cat sat on a mat <|assistant|>" and ids.chat
    cut = encode_prompt(tok, "the cat sat on a mat", chat=True, max_prompt_tokens=5)
    assert cut.truncated and tok.decode(cut.ids) == "<|user|> on a mat <|assistant|>"
    with pytest.raises(PromptTooLongError):
        encode_prompt(tok, "the cat sat", chat=True, max_prompt_tokens=2)


# ---- parameters -----------------------------------------------------------------------------------
def test_llm_and_sampling_kwargs() -> None:
    spec = gen_spec(dtype="bfloat16", top_k=40,
                    options=(("max_model_len", "4096"), ("tensor_parallel_size", "2"),
                             ("enforce_eager", "true")))
    opts = parse_options(spec)
    assert llm_kwargs(spec, opts) == {"model": "org/tiny", "tensor_parallel_size": 2,
                                      "trust_remote_code": False, "seed": 0, "max_model_len": 4096,
                                      "enforce_eager": True, "dtype": "bfloat16"}
    assert sampling_kwargs(spec, 3, 2**40 + 5) == {"n": 3, "seed": api_seed(2**40 + 5), "temperature": 0.7,
                                                    "top_p": 1.0, "top_k": 40, "max_tokens": 4}
    assert sampling_kwargs(gen_spec(), 1, 1)["top_k"] == -1  # 0 = off in polytox, -1 = off in vLLM
    assert 0 <= api_seed(2**63 - 1) < 2**31 and api_seed(7) == 7
    with pytest.raises(PolytoxError, match="backend 'vllm' has no --model-opt 'tp'"):
        parse_options(gen_spec(options=(("tp", "2"),)))
    with pytest.raises(PolytoxError, match="seed_mode"):
        parse_options(gen_spec(options=(("seed_mode", "batch"),)))


def test_plan_groups_k_samples_per_prompt_or_one_per_sample() -> None:
    prompts = [Prompt("a", "the cat", "en"), Prompt("b", "a dog", "en")]
    reqs = requests_for(prompts, 3, seed=9)
    tok = tiny_tokenizer()

    def enc(text: str) -> Any:
        return encode_prompt(tok, text, chat=False, max_prompt_tokens=None)

    planned, errors = plan_requests(reqs, enc, "prompt")
    assert not errors and [len(p.requests) for p in planned] == [3, 3]
    assert [p.seed for p in planned] == [derive_seed(9, "a", 0), derive_seed(9, "b", 0)]
    planned, _ = plan_requests(reqs, enc, "sample")
    assert len(planned) == 6 and [p.seed for p in planned] == [r.seed for r in reqs]
    planned, _ = plan_requests([reqs[1], reqs[2]], enc, "prompt")  # samples 1, 2 only: not 0..K-1
    assert [p.seed for p in planned] == [reqs[1].seed, reqs[2].seed]


# ---- the generator against the stand-in LLM --------------------------------------------------------
def test_generate_builds_one_request_per_prompt_with_n_k_and_maps_outputs() -> None:
    spec = gen_spec(options=(("tensor_parallel_size", "2"),))
    gen, llm = make(spec)
    assert llm.kwargs["tensor_parallel_size"] == 2 and gen.max_model_len == 12 and gen.max_prompt_tokens == 8
    prompts = [Prompt("p1", "the cat sat", "en"), Prompt("p2", "hello world you are", "en"),
               Prompt("long", "the cat sat on a mat hello world you are an idiot", "en"),
               Prompt("u", "", "en")]
    reqs = requests_for(prompts, 3, seed=1)
    out = gen.generate(reqs)
    assert [(g.prompt_id, g.sample_index) for g in out] == [(r.prompt.id, r.sample_index) for r in reqs]
    (inputs, params), = llm.calls
    assert [p.n for p in params] == [3, 3, 3, 3]
    assert [p.seed for p in params] == [api_seed(derive_seed(1, p.id, 0)) for p in prompts]
    assert all(p.max_tokens == 4 and p.temperature == 0.7 and p.top_k == -1 for p in params)
    assert inputs[0]["prompt_token_ids"] == [WORDS.index(w) for w in ["the", "cat", "sat"]]
    assert len(inputs[2]["prompt_token_ids"]) == 8  # 12 - 4 new tokens, cut from the left
    assert inputs[3]["prompt_token_ids"] == [WORDS.index("<s>")]  # unprompted: BOS alone
    assert [g.prompt_truncated for g in out if g.prompt_id == "long"] == [True] * 3
    assert not any(g.prompt_truncated for g in out if g.prompt_id != "long")
    # output j is sample j (the stand-in returns outputs in reverse order)
    first = [g.text for g in out if g.prompt_id == "p1"]
    assert len(set(first)) == 3 and all(g.n_tokens == 4 and g.finish_reason == "length" for g in out)
    again, _ = make(spec)
    assert [g.text for g in again.generate(reqs)] == [g.text for g in out]  # deterministic in the seeds


def test_one_bad_prompt_fails_as_data_and_the_rest_still_generates() -> None:
    gen, llm = make(gen_spec(samples=2))
    reqs = requests_for([Prompt("ok", "the cat", "en"), Prompt("bad", "boom", "en")], 2)
    out = gen.generate(reqs)
    assert [g.error is None for g in out] == [True, True, False, False]
    assert out[2].finish_reason == "error" and "stand-in vLLM refuses" in (out[2].error or "")
    assert len(llm.calls) == 3  # the whole batch, then each request alone


def test_without_vllm_installed_the_error_names_the_extra() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"polytox\[vllm\]"):
            VLLMGenerator(gen_spec())
    else:  # pragma: no cover - only on a GPU machine with vLLM
        pytest.skip("vllm is installed")


class _StandInBackend(VLLMGenerator):
    """The vLLM backend with a stand-in engine, registered under a name so the runner builds it."""

    def __init__(self, spec: GenerationSpec) -> None:
        super().__init__(spec, llm_cls=StandInLLM.factory(tiny_tokenizer(chat=True), 64),
                         sampling_params_cls=StandInSamplingParams)

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:  # the stand-in engine loads no model: options only
        parse_options(spec)


def test_evaluate_with_the_vllm_backend_writes_the_run_store(tmp_path: Path) -> None:
    registry.register("generator", "vllm-standin", _StandInBackend)  # type: ignore[arg-type]
    spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",)),
                    generation=dataclasses.replace(gen_spec(samples=2), backend="vllm-standin"),
                    scorer=ScorerSpec(name="fake"), shard_size=4)
    result = evaluate(spec, tmp_path / "run")
    gens = pq.read_table(tmp_path / "run" / "generations").to_pylist()
    n_prompts = result.metrics["overall"]["n_prompts"]
    assert len(gens) == 2 * n_prompts and result.metrics["overall"]["n_generations"] == len(gens)
    assert all(g["error"] is None and g["n_tokens"] == 4 for g in gens)
    manifest = (tmp_path / "run" / "manifest.json").read_text()
    assert '"seed_mode": "prompt"' in manifest and '"chat_template": true' in manifest
