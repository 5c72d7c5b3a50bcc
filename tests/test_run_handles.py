"""Two handles on a run directory: the read-only ``Run`` (``polytox.open_run``, ``polytox.evaluate``) and the
writer ``RunStore``; the old names (``load_run``, ``RunResult``) still work for one release and warn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import polytox
from polytox import runner
from polytox.api import Run
from polytox.store import RunStore


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("handles") / "run"
    return polytox.evaluate(model="fake", scorer="fake", prompts="demo", lang="en", limit=4, samples=2, out=out)


def test_evaluate_and_open_run_give_the_same_read_only_run(made: Run) -> None:
    opened = polytox.open_run(made.path)
    assert isinstance(made, Run) and isinstance(opened, Run)
    stored = json.loads((made.path / "metrics.json").read_text())
    assert json.loads(json.dumps(made.metrics)) == json.loads(json.dumps(opened.metrics)) == stored
    assert made.metrics["overall"]["n_generations"] == 8
    # called, the metrics are computed again (other settings, same numbers at the run's own)
    assert made.metrics(seed=made.spec.seed)["overall"] == stored["overall"]
    assert made.metrics(threshold=0.0)["overall"]["ep"] == 1.0
    assert opened.spec == made.spec and not opened.resumed and opened.prompt_set is None
    assert made.prompt_set is not None and len(made.prompt_set.prompts) == 4
    assert opened.failures.n_samples == made.failures.n_samples == 8
    assert not hasattr(Run, "write_metrics") and not hasattr(Run, "open")  # the writer is RunStore


def test_the_old_names_warn_and_still_work(made: Run) -> None:
    with pytest.deprecated_call(match="open_run"):
        store = polytox.load_run(str(made.path))
    assert isinstance(store, RunStore) and store.manifest()["status"] == "complete"
    with pytest.deprecated_call(match="returns a read-only Run"):
        assert polytox.RunResult is Run
    with pytest.deprecated_call(match="returns a Run"):
        from polytox.api import RunResult
    assert RunResult is Run
    with pytest.deprecated_call(match="ExecutionReport"):
        assert runner.RunResult is runner.ExecutionReport


def test_the_runner_function_is_not_named_as_the_api() -> None:
    assert not hasattr(runner, "evaluate") and callable(runner.execute_run)
    assert polytox.evaluate.__module__ == "polytox.api.evaluation"


def test_a_resumed_run_says_so(made: Run, tmp_path: Path) -> None:
    again = polytox.evaluate(made.spec, made.path)
    assert again.resumed and again.shards_done_before == 1 and again.metrics == made.metrics
