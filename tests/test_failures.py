"""Failed runs: fatal generation failures stop the run, transient ones are data, ``--retry-failed`` repairs
them to exactly the uninterrupted run, and the end of ``polytox eval`` says what failed (exit codes 0/3/4).

Faults are injected with the fake backend (``POLYTOX_FAKE_FAULTS``, outside the spec, so the faulted run
and its repair share one spec), with stand-in engines for the vLLM and openai backends' classification,
and (tests/test_llamacpp_server.py) with a real llama.cpp server killed mid-run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox import registry
from polytox.cli.failure_report import parse_max_failed
from polytox.errors import EXIT_STOPPED, EXIT_TOO_MANY_FAILED, FatalGenerationError, PolytoxError, RunStoppedError
from polytox.executors import ExecutorConfig
from polytox.generation.fake import FAULTS_ENV, FakeGenerator
from polytox.metrics.failures import error_kind
from polytox.prompts import load_prompts
from polytox.runner import execute_run as evaluate
from polytox.scoring.fake import FakeScorer
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import Score, text_hash

from .core_helpers import eval_args, read_json, run_cli, run_cli_subprocess

N_PROMPTS, K, SHARD = 24, 5, 4  # 6 shards, 120 samples


def spec(**gen: Any) -> EvalSpec:
    return EvalSpec(prompts=PromptSpec(source="demo", limit=N_PROMPTS),
                    generation=GenerationSpec(model="fake", backend="fake", samples=K, max_new_tokens=8, **gen),
                    scorer=ScorerSpec(name="fake"), shard_size=SHARD, seed=5)


def parts(run: Path) -> dict[str, list[dict[str, Any]]]:
    return {str(p.relative_to(run)): pq.read_table(p).to_pylist() for p in sorted(run.rglob("part-*.parquet"))}


@pytest.fixture
def reference(tmp_path: Path) -> Path:
    """The uninterrupted, unfaulted run."""
    evaluate(spec(), tmp_path / "reference")
    return tmp_path / "reference"


# ---- transient failures are data; --retry-failed repairs them exactly -----------------------------------
def test_retry_failed_regenerates_only_the_failed_samples_and_equals_the_uninterrupted_run(
        tmp_path: Path, reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    monkeypatch.setenv(FAULTS_ENV, "transient=0.04")
    faulted = evaluate(spec(), run)
    gens = pq.read_table(run / "generations").to_pylist()
    failed = [(g["prompt_id"], g["sample_index"]) for g in gens if g["error"]]
    assert 2 <= len(failed) <= 12 and faulted.failures.n_failed_generations == len(failed)
    assert all(g["error"].startswith("FAKE_TRANSIENT") for g in gens if g["error"])
    assert parts(run) != parts(reference)
    before = {k: v for k, v in parts(run).items() if k.startswith("generations")}

    monkeypatch.delenv(FAULTS_ENV)
    repaired = evaluate(spec(), run, retry_failed=True)
    assert parts(run) == parts(reference)  # every part, row for row
    assert read_json(run / "metrics.json") == read_json(reference / "metrics.json")
    assert repaired.failures.n_failed == 0
    retry = repaired.retry
    assert retry is not None and retry["generations_retried"] == retry["generations_recovered"] == len(failed)
    assert retry["samples_sent"] == len(failed)  # the fake backend's samples depend on their own seed only
    shards_with_failures = {k for k, rows in before.items() if any(r["error"] for r in rows)}
    assert retry["shards_repaired"] == len(shards_with_failures) < N_PROMPTS // SHARD
    manifest = read_json(run / "manifest.json")
    assert manifest["retries"] == [retry] and manifest["retries"][0]["at"] >= manifest["created_at"]
    assert manifest["status"] == "complete" and manifest["failures"]["n_failed_samples"] == 0
    again = evaluate(spec(), run, retry_failed=True)  # nothing left to retry: nothing rewritten
    assert again.retry is not None and again.retry["shards_repaired"] == 0
    assert len(read_json(run / "manifest.json")["retries"]) == 2


def test_a_sample_that_fails_again_stays_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULTS_ENV, "transient=0.1")
    first = evaluate(spec(), tmp_path / "run")
    result = evaluate(spec(), tmp_path / "run", retry_failed=True)  # the fault is still there
    assert result.retry is not None and result.retry["generations_recovered"] == 0
    assert result.failures.n_failed == first.failures.n_failed > 0


class _Refusing(FakeScorer):
    """The fake scorer, refusing a third of the texts with a permanent 400 while ``refusing`` is set (a
    cause outside the scorer's identity, as a Perspective project setting is)."""

    name = "fake-refusing"
    refusing = True

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        scores = super().score_batch(texts, langs)
        return [Score.failed("PERSPECTIVE_400 INVALID_ARGUMENT: refused for now")
                if _Refusing.refusing and text_hash(t)[0] in "0123" else s for t, s in zip(texts, scores, strict=True)]


def test_retry_failed_asks_again_for_cached_permanent_errors(tmp_path: Path) -> None:
    """A 400 is cached per text; once its cause is fixed, --retry-failed asks again instead of replaying it."""
    registry.register("scorer", "fake-refusing", _Refusing)  # type: ignore[arg-type]
    cache = ("cache", str(tmp_path / "scores.sqlite"))
    refusing = dataclasses.replace(spec(), scorer=ScorerSpec(name="fake-refusing", options=(cache,)))
    try:
        _Refusing.refusing = True
        first = evaluate(refusing, tmp_path / "run")
        errors = [r["error"] for rows in parts(tmp_path / "run").values() for r in rows if r.get("error")]
        failed = [e for e in errors if "refused for now" in e]
        assert len(failed) >= 10 and first.retry is None
        _Refusing.refusing = False
        repaired = evaluate(refusing, tmp_path / "run", retry_failed=True)
    finally:
        _Refusing.refusing = True
        registry.unregister("scorer", "fake-refusing")
    retry = repaired.retry
    assert retry is not None and retry["scores_retried"] == retry["scores_recovered"] == len(failed)
    after = [r["error"] for rows in parts(tmp_path / "run").values() for r in rows if r.get("error")]
    assert sorted(after) == sorted(e for e in errors if e not in failed)  # only the refusals were cured


def test_retry_sends_whole_prompts_for_backends_that_seed_a_prompts_k_samples_together() -> None:
    from polytox.executors.shards import shard_requests
    from polytox.generation.openai_backend import OpenAIGenerator

    s = spec()
    prompts = load_prompts(s.prompts, s.seed).prompts[:2]
    shard = shard_requests(prompts, s)
    failed = [shard[1], shard[3]]  # samples 1 and 3 of the first prompt
    assert FakeGenerator(s.generation).retry_requests(failed, shard) == failed
    n_mode = OpenAIGenerator(dataclasses.replace(s.generation, backend="openai",
                                                 options=(("base_url", "http://127.0.0.1:9/v1"),)))
    assert n_mode.retry_requests(failed, shard) == shard[:K]  # the whole prompt: one n=K call, sample 0's seed
    repeat = OpenAIGenerator(dataclasses.replace(s.generation, backend="openai", options=(
        ("base_url", "http://127.0.0.1:9/v1"), ("n_mode", "repeat"))))
    assert repeat.retry_requests(failed, shard) == failed
    n_mode.close()
    repeat.close()


# ---- fatal failures stop the run -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["serial", "pipelined"])
def test_a_fatal_failure_stops_scheduling_keeps_what_is_done_and_resumes_exactly(
        tmp_path: Path, reference: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    run = tmp_path / "run"
    monkeypatch.setenv(FAULTS_ENV, "fatal_after=2")
    calls: list[int] = []
    original = FakeGenerator.generate

    def counting(self: FakeGenerator, requests: Any) -> Any:
        calls.append(len(requests))
        return original(self, requests)

    monkeypatch.setattr(FakeGenerator, "generate", counting)
    with pytest.raises(RunStoppedError) as stop:
        evaluate(spec(), run, executor=ExecutorConfig(kind=kind, queue_depth=2))
    message = str(stop.value)
    assert "\n" not in message and "FAKE_ENGINE_DEAD" in message
    assert f"2 of {N_PROMPTS // SHARD} shard(s) are stored" in message
    assert message.endswith(f"resume with: polytox eval --out {run} --retry-failed")
    assert len(calls) == 3  # two shards, then the dead call: no shard after it was attempted
    stored = parts(run)
    assert sorted(stored) == sorted(k for k in parts(reference) if k.endswith(("00000.parquet", "00001.parquet")))
    assert all(stored[k] == parts(reference)[k] for k in stored)  # both finished shards scored and intact
    manifest = read_json(run / "manifest.json")
    assert manifest["status"] == "stopped" and manifest["stops"][0]["shards_stored"] == 2
    assert manifest["stops"][0]["cause"].startswith("FAKE_ENGINE_DEAD")

    monkeypatch.delenv(FAULTS_ENV)
    resumed = evaluate(spec(), run, retry_failed=True)
    assert resumed.resumed and resumed.shards_done_before == 2
    assert parts(run) == parts(reference)
    assert read_json(run / "metrics.json") == read_json(reference / "metrics.json")
    assert read_json(run / "manifest.json")["status"] == "complete"


class _LoadFails(FakeGenerator):
    def __init__(self, s: GenerationSpec) -> None:
        raise OSError("model.safetensors: no such file")


def test_a_model_that_fails_to_load_stops_the_run_with_its_cause(tmp_path: Path) -> None:
    registry.register("generator", "fake-load-fails", _LoadFails)  # type: ignore[arg-type]
    broken = dataclasses.replace(spec(), generation=dataclasses.replace(spec().generation, backend="fake-load-fails"))
    try:
        with pytest.raises(RunStoppedError, match=r"the model failed to load \(fake-load-fails backend, fake\): "
                                                  r"OSError: model.safetensors: no such file; 0 of 6 shard"):
            evaluate(broken, tmp_path / "run")
    finally:
        registry.unregister("generator", "fake-load-fails")


# ---- the command line: summary, exit codes ---------------------------------------------------------------
def test_cli_summary_exit_codes_and_retry_with_the_stored_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    args = eval_args(out, limit=N_PROMPTS, samples=K, shard_size=SHARD, seed=5, max_new_tokens=8)
    monkeypatch.setenv(FAULTS_ENV, "transient=0.1")
    code, table, err = run_cli(capsys, *args)
    assert code == EXIT_TOO_MANY_FAILED and "overall" in table
    n_failed = sum(g["error"] is not None for g in pq.read_table(out / "generations").to_pylist())
    lines = err.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("failed:"))
    assert lines[head].startswith(f"failed: {n_failed} of {N_PROMPTS * K} samples")
    assert "more than --max-failed 0.5% (exit code 3)" in lines[head]
    assert lines[head + 1].split()[:3] == ["generation", "FAKE_TRANSIENT", str(n_failed)]
    assert "e.g. FAKE_TRANSIENT: injected transient failure" in lines[head + 1]
    assert lines[-1].endswith(f"polytox eval --out {out} --retry-failed")
    # the same run within a looser limit exits 0, the summary still printed
    code, _, err = run_cli(capsys, *args, "--max-failed", "20%")
    assert code == 0 and "within --max-failed 20%" in err
    assert run_cli(capsys, *args, "--max-failed", str(n_failed))[0] == 0  # a count
    assert run_cli(capsys, *args, "--max-failed", str(n_failed - 1))[0] == EXIT_TOO_MANY_FAILED
    # the repair, from the stored spec alone
    monkeypatch.delenv(FAULTS_ENV)
    code, _, err = run_cli(capsys, "eval", "--retry-failed", str(out), "--no-progress")
    assert code == 0, err
    assert f"retried {n_failed} failed generation(s): {n_failed} recovered" in err and "failed:" not in err
    code, _, err = run_cli(capsys, "eval", "--retry-failed", str(out), "--out", str(tmp_path / "x"))
    assert code == 2 and "name different run directories" in err
    code, _, err = run_cli(capsys, *args, "--max-failed", "lots")
    assert code == 2 and "--max-failed 'lots'" in err


def test_cli_fatal_stop_is_one_line_and_exit_code_4(tmp_path: Path) -> None:
    """A real ``polytox`` process: the stop is one ``polytox: error:`` line, then the printed command resumes."""
    out = tmp_path / "run"
    args = eval_args(out, limit=N_PROMPTS, samples=K, shard_size=SHARD, seed=5, max_new_tokens=8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(FAULTS_ENV, "fatal_after=3")
        proc = run_cli_subprocess(tmp_path / "cache", *args)
    assert proc.returncode == EXIT_STOPPED, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("polytox: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert "FAKE_ENGINE_DEAD" in errors[0] and "3 of 6 shard(s) are stored" in errors[0]
    command = errors[0].split("resume with: ")[1].split()
    assert command[:2] == ["polytox", "eval"]
    resumed = run_cli_subprocess(tmp_path / "cache", *command[1:], "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert read_json(out / "metrics.json")["overall"]["n_generations"] == N_PROMPTS * K


def test_max_failed_forms_and_error_kinds() -> None:
    assert parse_max_failed("0.5%").share == 0.005 and parse_max_failed("0.01").share == 0.01
    assert parse_max_failed("12").count == 12 and parse_max_failed("0").count == 0
    for bad in ("1.5", "-1%", "150%", "x"):
        with pytest.raises(PolytoxError, match="--max-failed"):
            parse_max_failed(bad)
    assert error_kind("HTTP_503: upstream") == "HTTP_503"
    assert error_kind("VLLM_ENGINE_DEAD: the vLLM engine died") == "VLLM_ENGINE_DEAD"
    assert error_kind("something broke") == "OTHER" and error_kind(None) == "OTHER"


# ---- backends classify: vLLM's dead engine, the openai backend's vanished server -------------------------
def test_vllm_dead_engine_is_fatal_and_stays_dead() -> None:
    from polytox.generation.vllm_backend import VLLMGenerator
    from polytox.types import Prompt

    from .scale_helpers import StandInLLM, StandInSamplingParams, tiny_tokenizer
    from .test_vllm_backend import gen_spec, requests_for

    class EngineDeadError(Exception):  # vLLM's class of that name (vllm.v1.engine.exceptions)
        pass

    class DyingLLM(StandInLLM):
        def generate(self, prompts: Any, params: Any, use_tqdm: bool = False) -> Any:
            if len(self.calls) >= 1:
                self.calls.append((prompts, params))
                try:
                    raise RuntimeError("CPU Generator does not use offset")
                except RuntimeError as exc:
                    raise EngineDeadError("EngineCore encountered an issue.") from exc
            return super().generate(prompts, params, use_tqdm)

    gen = VLLMGenerator(gen_spec(samples=2), llm_cls=DyingLLM.factory(tiny_tokenizer(), 12),
                        sampling_params_cls=StandInSamplingParams)
    ok = gen.generate(requests_for([Prompt("a", "the cat", "en")], 2))
    assert all(g.error is None for g in ok)
    with pytest.raises(FatalGenerationError, match=r"VLLM_ENGINE_DEAD: the vLLM engine died: EngineDeadError: "
                                                   r"EngineCore encountered an issue. \(after RuntimeError: CPU "
                                                   r"Generator does not use offset\)"):
        gen.generate(requests_for([Prompt("b", "a dog", "en")], 2))
    calls = len(gen.llm.calls)
    with pytest.raises(FatalGenerationError):  # dead stays dead, without asking the engine again
        gen.generate(requests_for([Prompt("c", "the cat", "en")], 2))
    assert len(gen.llm.calls) == calls


def test_openai_server_gone_is_fatal_a_5xx_is_a_per_sample_error() -> None:
    import socket

    from polytox.generation.openai_backend import OpenAIGenerator
    from polytox.types import GenerationRequest, Prompt

    from .openai_server import FakeOpenAI

    def make(url: str) -> OpenAIGenerator:
        options = (("backoff", "0.01"), ("base_url", url), ("concurrency", "1"), ("max_backoff", "0.02"),
                   ("max_retries", "2"), ("timeout", "5"))
        return OpenAIGenerator(GenerationSpec(model="m", backend="openai", samples=2, max_new_tokens=4,
                                              options=options))

    reqs = [GenerationRequest(Prompt(p, t, "en"), k, 10 * i + k)
            for i, (p, t) in enumerate([("a", "hello [503]"), ("b", "hello there")]) for k in range(2)]
    with FakeOpenAI() as server:
        gen = make(server.base_url)
        out = gen.generate(reqs)
        assert [g.error is None for g in out] == [False, False, True, True]
        assert (out[0].error or "").startswith("HTTP_503") and "after 3 attempts" in (out[0].error or "")
        gen.close()
    with socket.socket() as s:  # a port nothing listens on: connection refused on every attempt
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = make(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(FatalGenerationError, match=r"HTTP_SERVER_GONE: no connection to .* in 3 attempts"):
        gen.generate(reqs)
    assert gen.stats.http_requests == 3  # the queued call failed at once, not after its own retries
    gen.close()


def test_ray_actors_carry_a_fatal_failure_as_a_row_not_a_ray_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ray executor's actors, called as Ray calls them (one shard per batch): after the backend dies the
    row holds the message in ``fatal`` (the driver raises it), and the actor answers later shards at once."""
    from polytox.executors.ray_data import GenerateActor, ScoreActor, prompts_to_json

    s = spec()
    prompts = load_prompts(s.prompts, s.seed).prompts
    monkeypatch.setenv(FAULTS_ENV, "fatal_after=1")
    actor, scorer = GenerateActor(s.to_dict()), ScoreActor(s.to_dict(), None)
    rows = [actor({"shard": [i], "prompts": [prompts_to_json(prompts[SHARD * i:SHARD * (i + 1)])],
                   "generations": [""]}) for i in range(3)]
    assert rows[0]["fatal"] == [""]
    assert all(r["fatal"][0].startswith("FAKE_ENGINE_DEAD") and r["generations"] == [""] for r in rows[1:])
    assert actor.generator.calls == 2  # the third shard never reached the dead backend
    scored = [scorer(dict(r)) for r in rows]
    assert scored[0]["fatal"] == [""] and len(json.loads(scored[0]["scores"][0])) == SHARD * K
    assert scored[2]["fatal"] == rows[2]["fatal"] and scored[2]["scores"] == ["[]"]
