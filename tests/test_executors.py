"""Serial and pipelined executors: identical run directories, overlap measured, resume across executors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox.errors import PolytoxError
from polytox.executors import ExecutorConfig, build_executor
from polytox.runner import execute_run as evaluate
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec


def fake_spec(gen_delay: float = 0.0, score_delay: float = 0.0, limit: int | None = None,
              shard_size: int = 8) -> EvalSpec:
    gen_opts = (("delay", str(gen_delay)), ("fail_rate", "0.1"), ("toxicity", "0.2"))
    scorer_opts = (("delay", str(score_delay)), ("fail_rate", "0.05"))
    return EvalSpec(prompts=PromptSpec(source="demo", limit=limit),
                    generation=GenerationSpec(model="fake", backend="fake", samples=3, max_new_tokens=6,
                                              options=gen_opts),
                    scorer=ScorerSpec(name="fake", options=scorer_opts), shard_size=shard_size, seed=3)


def parts(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Every part's rows, by relative path: what 'identical run directories' means."""
    return {str(p.relative_to(run)): pq.read_table(p).to_pylist()
            for p in sorted(run.rglob("part-*.parquet"))}


def test_serial_and_pipelined_write_identical_parts_and_metrics(tmp_path: Path) -> None:
    spec = fake_spec()
    serial = evaluate(spec, tmp_path / "serial", executor=ExecutorConfig(kind="serial"))
    piped = evaluate(spec, tmp_path / "piped", executor=ExecutorConfig(kind="pipelined", queue_depth=1))
    a, b = parts(tmp_path / "serial"), parts(tmp_path / "piped")
    assert len(a) == 2 * 13 and a == b  # 104 prompts / 8 per shard = 13 shards, generations + scores
    assert serial.metrics["overall"] == piped.metrics["overall"]
    assert serial.metrics["overall"]["n_failed_generations"] > 0  # failures are data in both
    manifest = json.loads((tmp_path / "piped" / "manifest.json").read_text())
    assert manifest["executor"]["executor"] == "pipelined" and manifest["executor"]["shards_scored"] == 13


def test_pipelining_overlaps_scoring_with_generation(tmp_path: Path) -> None:
    # 6 shards, equal stage times; the stages sleep long enough (0.15 s) that a loaded 2-core machine's
    # bookkeeping between them (parquet writes, thread switches) stays small beside them
    stage = 0.15
    spec = fake_spec(gen_delay=stage, score_delay=stage, limit=48)
    serial = evaluate(spec, tmp_path / "s", executor=ExecutorConfig(kind="serial"))
    piped = evaluate(spec, tmp_path / "p", executor=ExecutorConfig(kind="pipelined"))
    s = json.loads((tmp_path / "s" / "manifest.json").read_text())["executor"]
    p = json.loads((tmp_path / "p" / "manifest.json").read_text())["executor"]
    assert serial.metrics["overall"] == piped.metrics["overall"]
    # serial: ~6 x (stage + stage); pipelined: ~7 x stage (scoring hides behind the next generation)
    assert p["wall_seconds"] < 0.8 * s["wall_seconds"], (p, s)
    assert s["wait_for_scores_seconds"] >= 6 * stage * 0.9
    assert p["wait_for_scores_seconds"] < 0.5 * s["wait_for_scores_seconds"], (p, s)


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("first,second", [("pipelined", "serial"), ("serial", "pipelined")])
def test_an_interrupted_run_resumes_to_the_same_result_with_either_executor(
        tmp_path: Path, first: str, second: str) -> None:
    spec = fake_spec(limit=40)
    evaluate(spec, tmp_path / "ref", executor=ExecutorConfig(kind="serial"))

    def stop_after_two(stage: str, done: int, total: int) -> None:
        if done >= 2 * 8 * 3:
            raise Interrupt  # raised on the scoring thread when pipelined: must reach the caller

    with pytest.raises(Interrupt):
        evaluate(spec, tmp_path / "run", progress=stop_after_two, executor=ExecutorConfig(kind=first))
    scored = list((tmp_path / "run" / "scores").rglob("part-*.parquet"))
    assert 2 <= len(scored) < 5
    # lose one generation part too, as if killed between the two writes of a shard
    shutil.rmtree(tmp_path / "run" / "scores")
    (tmp_path / "run" / "generations" / "part-00001.parquet").unlink()
    result = evaluate(spec, tmp_path / "run", executor=ExecutorConfig(kind=second))
    assert result.resumed and parts(tmp_path / "run") == parts(tmp_path / "ref")


def test_unknown_executor_is_a_clear_error() -> None:
    with pytest.raises(PolytoxError, match="unknown executor 'dask'"):
        build_executor(ExecutorConfig(kind="dask"))
    with pytest.raises(PolytoxError, match="workers must be >= 1"):
        ExecutorConfig(kind="ray", gen_workers=0)


def test_cli_execution_flags_and_yaml_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from polytox.cli.eval_cmd import executor_config
    from polytox.cli.main import build_parser, main

    config = tmp_path / "run.yaml"
    config.write_text("executor: serial\nqueue_depth: 3\nmodel: fake\nscorer: fake\nlimit: 6\nsamples: 2\n")
    code = main(["eval", "--config", str(config), "--out", str(tmp_path / "r"), "--no-progress", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["overall"]["n_generations"] == 12
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["executor"]["executor"] == "serial"
    args = build_parser().parse_args(["eval", "--out", "x", "--executor", "ray", "--workers", "2",
                                      "--gpus-per-worker", "1", "--ray-address", "auto"])
    flat = {"score_workers": 3, "model": "fake"}
    assert executor_config(flat, args) == ExecutorConfig(kind="ray", gen_workers=2, gpus_per_gen_worker=1.0,
                                                         ray_address="auto", score_workers=3)
    assert flat == {"model": "fake"}  # execution keys never reach the spec
