"""The Ray Data executor on a local Ray (CPU): same parts and metrics as the local executors, and resume."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polytox._util.checksum import sidecar
from polytox.executors import ExecutorConfig
from polytox.runner import execute_run as evaluate

from .test_executors import Interrupt, fake_spec, parts

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

RAY = ExecutorConfig(kind="ray", gen_workers=2, score_workers=1, cpus_per_worker=0.5)


def test_ray_gives_the_same_parts_and_metrics_as_the_local_executor(tmp_path: Path) -> None:
    spec = fake_spec(limit=40)  # 5 shards, fake generator and scorer with injected failures
    local = evaluate(spec, tmp_path / "local", executor=ExecutorConfig(kind="pipelined"))
    ray_run = evaluate(spec, tmp_path / "ray", executor=RAY)
    assert parts(tmp_path / "ray") == parts(tmp_path / "local")
    assert ray_run.metrics["overall"] == local.metrics["overall"]
    assert ray_run.metrics["by"] == local.metrics["by"]
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["executor"]["executor"] == "ray" and manifest["executor"]["shards_generated"] == 5
    assert manifest["executor"]["details"]["gen_workers"] == 2 and manifest["model"]["backend"] == "fake"


def test_ray_resumes_a_run_interrupted_under_the_local_executor(tmp_path: Path) -> None:
    spec = fake_spec(limit=40)
    evaluate(spec, tmp_path / "ref", executor=ExecutorConfig(kind="serial"))

    def stop_after_two(stage: str, done: int, total: int) -> None:
        if done >= 2 * 8 * 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        evaluate(spec, tmp_path / "run", progress=stop_after_two, executor=ExecutorConfig(kind="pipelined"))
    # keep only shard 0's scores: shard 1 (at least) is generated but not scored
    n_generated = len(list((tmp_path / "run" / "generations").glob("part-*.parquet")))
    assert n_generated >= 2
    (tmp_path / "run" / "scores").rename(tmp_path / "scores-kept")
    (tmp_path / "run" / "scores").mkdir()
    kept = sorted((tmp_path / "scores-kept").rglob("part-00000.parquet"))[0]
    target = tmp_path / "run" / "scores" / kept.parent.name
    target.mkdir()
    shutil.copy(kept, target / kept.name)
    shutil.copy(sidecar(kept), sidecar(target / kept.name))  # the part's checksum travels with it
    seen: list[int] = []
    result = evaluate(spec, tmp_path / "run", progress=lambda s, d, t: seen.append(d), executor=RAY)
    assert result.resumed and result.shards_done_before == 1
    assert parts(tmp_path / "run") == parts(tmp_path / "ref")
    assert seen[0] == 8 * 3 and seen[-1] == 40 * 3  # progress starts from the shard already done
    stats = json.loads((tmp_path / "run" / "manifest.json").read_text())["executor"]
    assert stats["shards_scored"] == 4 and stats["shards_generated"] == 5 - n_generated


def test_ray_stops_on_a_fatal_generation_failure_and_keeps_the_shards_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polytox.errors import RunStoppedError
    from polytox.generation.fake import FAULTS_ENV

    spec = fake_spec(limit=40)
    monkeypatch.setenv(FAULTS_ENV, "fatal_after=2")  # forwarded to the actors (POLYTOX_*)
    one_worker = ExecutorConfig(kind="ray", gen_workers=1, score_workers=1, cpus_per_worker=0.5)
    with pytest.raises(RunStoppedError, match=r"FAKE_ENGINE_DEAD.*2 of 5 shard"):
        evaluate(spec, tmp_path / "run", executor=one_worker)
    assert not ray.is_initialized()
    assert len(list((tmp_path / "run" / "scores").rglob("part-*.parquet"))) == 2
    monkeypatch.delenv(FAULTS_ENV)
    evaluate(spec, tmp_path / "ref", executor=ExecutorConfig(kind="serial"))
    evaluate(spec, tmp_path / "run", executor=ExecutorConfig(kind="serial"), retry_failed=True)
    assert parts(tmp_path / "run") == parts(tmp_path / "ref")


class _Slow:
    """A Ray Data map that takes a moment per row, so rows are still in flight when the loop is left."""

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.2)
        return batch


def test_rows_left_early_leave_no_ray_data_thread_running() -> None:
    """Leaving the rows early (a fatal row) returns only once Ray Data's pipeline threads have ended: one still
    calling Ray after ``ray.shutdown()`` ends the whole process (exit status 1, nothing printed) or starts a
    stray local Ray in it. Closing alone leaves two of them running for a moment."""
    from polytox.executors.ray_start import closing_rows, ray_session, start_ray

    workers = ("iter_threaded", "StreamingExecutor")
    started = start_ray(None, 2)
    with ray_session(ray, started):
        ds = ray.data.from_items([{"x": i} for i in range(12)], override_num_blocks=12).map_batches(
            _Slow, batch_size=1, compute=ray.data.ActorPoolStrategy(size=1), num_cpus=0.5)
        with closing_rows(ds.iter_rows()) as rows:
            assert next(rows)["x"] in range(12)  # Ray Data keeps no order by default
            assert [t for t in threading.enumerate() if t.name.startswith(workers)]  # the pipeline is running
        assert not [t.name for t in threading.enumerate() if t.name.startswith(workers)]
    assert not ray.is_initialized()
