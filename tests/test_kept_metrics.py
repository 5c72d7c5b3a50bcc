"""A run's metrics are computed once per scorer and settings, kept in RUN/derived/, never trusted stale."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import polytox
from polytox.metrics import for_path
from polytox.spec import MetricsSpec

from .core_helpers import rewrite_part


@pytest.fixture
def run(tmp_path: Path) -> Path:
    made = polytox.evaluate(model="fake", scorer="fake", prompts="demo", lang="en", limit=6, samples=3,
                            shard_size=2, out=tmp_path / "run")
    return Path(made.path)


def test_metrics_are_kept_and_a_changed_score_part_invalidates_them(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = MetricsSpec()
    first = for_path.compute_for_path(run, spec)
    assert first["overall"] == json.loads((run / "metrics.json").read_text())["overall"]  # the run's own numbers
    (kept,) = (run / "derived").glob("metrics-*.json")
    inputs = json.loads(kept.read_text())["inputs"]
    assert "prompts.parquet" in inputs and any(k.startswith("generations/") for k in inputs)
    assert any(k.startswith("scores/") for k in inputs)
    # a second read computes nothing
    real = polytox.metrics.run_metrics
    monkeypatch.setattr(polytox.metrics, "run_metrics", lambda *a, **k: pytest.fail("metrics recomputed"))
    assert for_path.compute_for_path(run, spec) == first
    # other settings are kept apart: a new computation, the first file untouched
    monkeypatch.setattr(polytox.metrics, "run_metrics", real)
    other = for_path.compute_for_path(run, MetricsSpec(threshold=0.9))
    assert other["settings"]["threshold"] == 0.9 and len(list((run / "derived").glob("metrics-*.json"))) == 2
    # a score part rewritten (a repair, a rescoring) with other values: the kept numbers are stale
    part = sorted((run / "scores").glob("*/part-00000.parquet"))[0]
    table = pq.read_table(part)
    table = table.set_column(table.schema.get_field_index("toxicity"), "toxicity",
                             pc.multiply(table.column("toxicity"), 0.5))
    rewrite_part(part, table)
    changed = for_path.compute_for_path(run, spec)
    assert changed["overall"]["at"] < first["overall"]["at"]
    assert changed == real(str(run), changed["scorer"], spec, seed=changed["settings"]["bootstrap_seed"]) | {
        k: v for k, v in changed.items() if k in ("model", "detox", "diversity", "incomplete", "scale")
    }


def test_a_damaged_kept_file_is_recomputed(run: Path) -> None:
    spec = MetricsSpec()
    first = for_path.compute_for_path(run, spec)
    (kept,) = (run / "derived").glob("metrics-*.json")
    kept.write_text(kept.read_text().replace('"emt": 0.', '"emt": 1.', 1))  # an edited number
    assert for_path.compute_for_path(run, spec) == first
    kept.write_text("{")
    assert for_path.compute_for_path(run, spec) == first
    assert json.loads(kept.read_text())["values"]["overall"] == first["overall"]
