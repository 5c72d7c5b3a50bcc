"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 (tests/openai_server.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polytox._util.ratelimit import TokenBucket
from polytox.errors import PolytoxError
from polytox.generation.openai_backend import OpenAIGenerator, allowed_n, plan_calls, usage_split
from polytox.generation.vllm_backend import api_seed
from polytox.runner import execute_run as evaluate
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import GenerationRequest, Prompt, derive_seed

from .openai_server import FakeOpenAI

FAST = (("backoff", "0.01"), ("max_backoff", "0.05"), ("max_retries", "2"), ("timeout", "5"))


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as s:
        yield s


def make(server: FakeOpenAI, samples: int = 3, chat: str = "auto", **opts: str) -> OpenAIGenerator:
    options = dict(FAST)
    options.update(opts)
    options["base_url"] = server.base_url
    spec = GenerationSpec(model="m", backend="openai", samples=samples, max_new_tokens=5, temperature=0.7,
                          top_p=0.9, chat_template=chat, options=tuple(sorted(options.items())))
    return OpenAIGenerator(spec)


def reqs(texts: list[str], k: int, seed: int = 0) -> list[GenerationRequest]:
    prompts = [Prompt(f"p{i}", t, "en") for i, t in enumerate(texts)]
    return [GenerationRequest(p, j, derive_seed(seed, p.id, j)) for p in prompts for j in range(k)]


def test_completions_with_n_k_returns_each_choice_as_its_sample(server: FakeOpenAI) -> None:
    gen = make(server)
    rs = reqs(["hello there", "the cat"], 3)
    out = gen.generate(rs)
    assert [(g.prompt_id, g.sample_index) for g in out] == [(r.prompt.id, r.sample_index) for r in rs]
    assert len(server.log) == 2 and all(e["path"] == "/v1/completions" for e in server.log)
    body = next(e["body"] for e in server.log if e["body"]["prompt"] == "hello there")
    assert body == {"model": "m", "max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "n": 3, "logprobs": 1,
                    "seed": api_seed(derive_seed(0, "p0", 0)), "prompt": "hello there"}
    for g in out[:3]:  # choice j of the seeded call is sample j, whatever order the server lists them in
        text, _, _ = server.text_for("hello there", body["seed"], g.sample_index, 5)
        assert g.text == text and g.finish_reason == "length" and g.error is None
    assert sum(g.n_tokens for g in out[:3]) == 15
    assert [g.text for g in make(server).generate(rs)] == [g.text for g in out]  # seeded: reproducible


def test_chat_endpoint_and_repeat_mode(server: FakeOpenAI) -> None:
    gen = make(server, samples=2, chat="always", n_mode="repeat")
    rs = reqs(["[stop] hi you"], 2, seed=5)
    out = gen.generate(rs)
    assert [e["path"] for e in server.log] == ["/v1/chat/completions"] * 2
    assert sorted(e["body"]["seed"] for e in server.log) == sorted(api_seed(r.seed) for r in rs)
    assert all(e["body"]["n"] == 1 and e["body"]["messages"] == [{"role": "user", "content": "[stop] hi you"}]
               and e["body"]["logprobs"] is True for e in server.log)
    assert [g.finish_reason for g in out] == ["stop", "stop"] and [g.n_tokens for g in out] == [2, 2]
    assert plan_calls(rs, "n")[0].seed == rs[0].seed


def test_transient_errors_are_retried_and_permanent_ones_are_not(server: FakeOpenAI) -> None:
    gen = make(server, samples=2)
    out = gen.generate(reqs(["[429x2] a", "[500x1] b", "[503] c", "[400] d"], 2))
    ok = {g.prompt_id: g for g in out if g.error is None}
    assert set(ok) == {"p0", "p1"}
    errors = {g.prompt_id: g.error for g in out if g.error}
    assert errors["p2"].startswith("HTTP_503") and "after 3 attempts" in errors["p2"]
    assert errors["p3"].startswith("HTTP_400") and "maximum context length" in errors["p3"]
    assert [g.finish_reason for g in out if g.prompt_id in ("p2", "p3")] == ["error"] * 4
    assert all(g.text is None for g in out if g.error)
    assert server.seen["[429x2] a"] == 3 and server.seen["[500x1] b"] == 2
    assert server.seen["[503] c"] == 3 and server.seen["[400] d"] == 1  # 400: no retry
    assert gen.stats.retries == 2 + 1 + 2 and gen.stats.failed_calls == 2
    assert gen.stats.n_rejected == 0 and gen.describe()["n_fallback"] is None  # a 400 not about n


def test_a_timeout_is_retried() -> None:
    with FakeOpenAI(slow_seconds=1.0) as server:
        gen = make(server, samples=1, timeout="0.3")
        out = gen.generate(reqs(["[slowx1] x"], 1))
        assert out[0].error is None and server.seen["[slowx1] x"] == 2 and gen.stats.retries == 1


def test_api_key_comes_from_the_environment_and_is_never_stored(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    secret = "sk-test-abc123"
    with FakeOpenAI(api_key=secret) as server:
        monkeypatch.setenv("MY_KEY", secret)
        gen = make(server, samples=1, api_key_env="MY_KEY")
        assert gen.generate(reqs(["hi"], 1))[0].error is None
        assert server.log[-1]["headers"]["authorization"] == f"Bearer {secret}"
        assert secret not in json.dumps(gen.describe()) and gen.describe()["api_key_set"] is True
        monkeypatch.setenv("MY_KEY", "sk-wrong")
        bad = make(server, samples=1, api_key_env="MY_KEY").generate(reqs(["hi"], 1))[0]
        assert bad.error is not None and bad.error.startswith("HTTP_401") and "sk-wrong" not in bad.error
        # the whole run: the key is in no file of the run directory
        monkeypatch.setenv("MY_KEY", secret)
        options = tuple(sorted({**dict(FAST), "base_url": server.base_url, "api_key_env": "MY_KEY"}.items()))
        spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=3),
                        generation=GenerationSpec(model="m", backend="openai", samples=2, max_new_tokens=4,
                                                  options=options),
                        scorer=ScorerSpec(name="fake"))
        evaluate(spec, tmp_path / "run")
        for path in (tmp_path / "run").rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(PolytoxError, match="MY_KEY"):
        make(server, api_key_env="MY_KEY")
    with pytest.raises(PolytoxError, match="environment variable"):
        make(server, api_key="sk-oops")


def test_concurrency_limit_holds() -> None:
    # each request lasts long enough that every allowed worker is in flight at once even on a loaded machine
    # (at 0.15 s a busy 2-core runner once saw 3 of 4)
    with FakeOpenAI(latency=0.4) as server:
        make(server, samples=1, concurrency="2").generate(reqs([f"p {i}" for i in range(8)], 1))
        assert server.peak_in_flight == 2
    with FakeOpenAI(latency=0.4) as server:
        make(server, samples=1, concurrency="4").generate(reqs([f"p {i}" for i in range(8)], 1))
        assert server.peak_in_flight == 4


def test_rate_limit_spaces_requests(server: FakeOpenAI) -> None:
    make(server, samples=1, concurrency="4", rate="20").generate(reqs([f"p {i}" for i in range(9)], 1))
    times = sorted(e["time"] for e in server.log)
    assert times[-1] - times[0] >= 8 / 20 * 0.9  # 9 requests at 20/s, burst 1


def test_rate_limiter_token_bucket_with_a_fake_clock() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    limiter = TokenBucket(4.0, 2, clock=lambda: now[0], sleep=sleep)
    assert [limiter.acquire() for _ in range(2)] == [0.0, 0.0]  # the burst
    assert limiter.acquire() == pytest.approx(0.25) and limiter.acquire() == pytest.approx(0.25)
    assert TokenBucket(0).acquire() == 0.0 and TokenBucket(0).take(5) == 0.0


def test_unprompted_requests(server: FakeOpenAI) -> None:
    out = make(server, samples=1, empty_prompt="<|endoftext|>").generate(reqs([""], 1))
    assert out[0].error is None and server.log[-1]["body"]["prompt"] == "<|endoftext|>"
    chat = make(server, samples=1, endpoint="chat").generate(reqs([""], 1))
    assert chat[0].error is not None and chat[0].error.startswith("UNPROMPTED_NOT_SUPPORTED")


def test_allowed_n_reads_the_maximum_from_real_server_messages() -> None:
    llamacpp = "HTTP_400: {\"error\":{\"code\":400,\"message\":\"Field 'n': Value must be between 1 <= value <= 4, " \
               "but got 5\",\"type\":\"invalid_request_error\"}}"
    assert allowed_n(llamacpp, 5) == 4
    assert allowed_n("HTTP_400: n must be <= 1", 3) == 1
    assert allowed_n("Invalid 'n': integer above maximum value. Expected a value <= 128, but got 200 instead.",
                     200) == 128
    assert allowed_n("`n` > 1 is not supported", 5) == 1  # no maximum stated: one sample per call
    assert allowed_n("Field 'n': at most 8", 5) == 4  # never above what was asked minus one
    assert allowed_n("This model's maximum context length is 8 tokens", 5) is None  # not about n
    assert allowed_n("Invalid value for 'top_p': must be <= 1", 5) is None
    assert allowed_n("n must be <= 1", 1) is None  # n=1 rejected: nothing smaller to fall back to


def test_a_server_that_takes_no_n_gets_one_call_per_sample_automatically(caplog: pytest.LogCaptureFixture
                                                                         ) -> None:
    with FakeOpenAI(max_n=1) as server:
        gen = make(server, samples=2, concurrency="1")
        with caplog.at_level("WARNING", logger="polytox"):
            out = gen.generate(reqs(["a", "b"], 2))
        assert [g.error for g in out] == [None] * 4 and all(g.n_tokens == 5 for g in out)
        assert [e["status"] for e in server.log] == [400, 200, 200, 200, 200]  # one refusal, then n=1 only
        assert [e["body"]["n"] for e in server.log] == [2, 1, 1, 1, 1]
        assert gen.max_n == 1 and gen.stats.n_rejected == 1
        fallback = gen.describe()["n_fallback"]
        assert fallback["max_n"] == 1 and fallback["mode"] == "repeat" and "n must be <= 1" in fallback["server_error"]
        assert "rejected n=2" in caplog.text and "at most n=1" in caplog.text
        # with a maximum of 1 every call carries its own sample's seed: exactly what n_mode=repeat sends
        repeat = make(server, samples=2, n_mode="repeat").generate(reqs(["a", "b"], 2))
        assert [g.text for g in repeat] == [g.text for g in out]


def test_a_llamacpp_style_maximum_splits_calls_and_keeps_every_sample(tmp_path: Path) -> None:
    with FakeOpenAI(max_n=4, n_style="llamacpp", usage_style="first") as server:
        gen = make(server, samples=5, concurrency="1")
        rs = reqs(["the cat", "[stop] hello you there"], 5, seed=3)
        out = gen.generate(rs)
        assert [(g.prompt_id, g.sample_index) for g in out] == [(r.prompt.id, r.sample_index) for r in rs]
        assert all(g.error is None for g in out)
        ok = [e for e in server.log if e["status"] == 200]
        assert [e["status"] for e in server.log].count(400) == 1 and [e["body"]["n"] for e in ok] == [4, 1, 4, 1]
        assert [e["body"]["seed"] for e in ok[:2]] == [api_seed(rs[0].seed), api_seed(rs[4].seed)]
        for g in out[:5]:  # samples 0-3 are choices of the n=4 call, sample 4 is choice 0 of its own call
            seed, index = (api_seed(rs[0].seed), g.sample_index) if g.sample_index < 4 else (api_seed(rs[4].seed), 0)
            assert g.text == server.text_for("the cat", seed, index, 5)[0]
        # token counts: llama.cpp's usage is choice 0's alone; the log-probabilities count each choice
        assert all(g.n_tokens == len((g.text or "").split()) for g in out)
        assert [g.n_tokens for g in out[5:]] == [2] * 5 and [g.finish_reason for g in out[5:]] == ["stop"] * 5
        assert gen.describe()["n_fallback"]["max_n"] == 4
        # the whole run records the fallback in its manifest and loses no sample
        options = tuple(sorted({**dict(FAST), "base_url": server.base_url}.items()))
        spec = EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=3),
                        generation=GenerationSpec(model="m", backend="openai", samples=6, max_new_tokens=4,
                                                  options=options),
                        scorer=ScorerSpec(name="fake"))
        result = evaluate(spec, tmp_path / "run")
        overall = result.metrics["overall"]
        assert overall["n_generations"] == 18 and overall["n_failed_generations"] == 0
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["model"]["n_fallback"]["max_n"] == 4 and manifest["model"]["n_fallback"]["rejected_n"] == 6


@pytest.mark.parametrize("chat", ["never", "always"])
def test_token_counts_are_per_choice_in_both_endpoints(chat: str) -> None:
    with FakeOpenAI(usage_style="first") as server:  # llama.cpp's usage: choice 0 only
        gen = make(server, samples=4, chat=chat)
        out = gen.generate(reqs(["[stop] one two", "plain prompt"], 4))
        assert all(g.error is None for g in out)
        assert [g.n_tokens for g in out] == [2] * 4 + [5] * 4
        logprobs = [e["body"]["logprobs"] for e in server.log]
        assert logprobs == ([True, True] if chat == "always" else [1, 1])
        # without log-probabilities, usage alone: length choices have max_tokens; a sum splits exactly
        usage_only = make(server, samples=4, chat=chat, token_counts="usage").generate(reqs(["plain"], 4))
        assert [g.n_tokens for g in usage_only] == [5] * 4 and "logprobs" not in server.log[-1]["body"]
    with FakeOpenAI(usage_style="sum") as server:
        out = make(server, samples=3, chat=chat, token_counts="usage").generate(reqs(["[stop] a b c d"], 3))
        assert [g.n_tokens for g in out] == [2, 2, 2]
        single = make(server, samples=1, chat=chat, token_counts="usage").generate(reqs(["[stop] a b c d"], 1))
        assert single[0].n_tokens == 2 and server.log[-1]["status"] == 200  # usage 3 = 2 + end-of-sequence
    assert usage_split(15, ["length", "stop", "stop"], 5) == [5, 4, 4]  # 15 = 5 + (4 + eos) * 2
    assert usage_split(8, ["stop"], 5) == [7] and usage_split(5, ["length"], 5) == [5]
    assert usage_split(None, ["stop", "stop"], 5) == [0, 0]


def test_bad_options_fail_clearly(server: FakeOpenAI) -> None:
    with pytest.raises(PolytoxError, match="base_url"):
        OpenAIGenerator(GenerationSpec(model="m", backend="openai"))
    with pytest.raises(PolytoxError, match=r"backend 'openai' has no --model-opt 'nmode' \(did you mean 'n_mode'\?\)"):
        make(server, nmode="n")


def test_failed_samples_are_stored_and_counted_by_the_run(server: FakeOpenAI, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    texts = ["you are", "[503] broken", "[429x1] hello", "today"]
    rows: list[dict[str, Any]] = [{"id": f"q{i}", "text": t, "lang": "en"} for i, t in enumerate(texts)]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = tuple(sorted({**dict(FAST), "base_url": server.base_url}.items()))
    spec = EvalSpec(prompts=PromptSpec(source=str(prompts), format="generic"),
                    generation=GenerationSpec(model="m", backend="openai", samples=3, max_new_tokens=4,
                                              options=options),
                    scorer=ScorerSpec(name="fake"), shard_size=2)
    result = evaluate(spec, tmp_path / "run")
    overall = result.metrics["overall"]
    assert overall["n_generations"] == 12 and overall["n_failed_generations"] == 3
    assert overall["n_missing_scores"] == 3 and overall["n_prompts"] == 3
    assert overall["n_prompts_unscored"] == 1
    n_requests = len(server.log)
    again = evaluate(spec, tmp_path / "run")  # resume: nothing left to do, no new requests
    assert len(server.log) == n_requests
    assert again.resumed and again.shards_done_before == 2 and again.metrics["overall"] == overall
