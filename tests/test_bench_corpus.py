"""CI-sized smoke run of benchmarks/bench_corpus.py: every table prints, and its numbers are consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .core_helpers import cli_env

REPO = Path(__file__).resolve().parents[1]
pytest.importorskip("sklearn")
pytest.importorskip("datasketch")
pytestmark = pytest.mark.slow


def test_bench_corpus_smoke(tmp_path: Path, shared_data: Path) -> None:
    report = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_corpus.py"), "--docs", "3000",
                           "--sizes", "500,1500", "--overlap-a", "1000", "--overlap-b", "500", "--check-sample",
                           "40", "--default-sample", "0", "--ray-docs", "0", "--json", str(report)],
                          env=cli_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for heading in ("## corpus: 3,000 documents", "## scoring", "## overlap", "## extrapolation to OWTC"):
        assert heading in proc.stdout
    data = json.loads(report.read_text())
    sizes = [r["size"] for r in data["scoring"]]
    assert sizes == [500, 1500]
    for row in data["scoring"]:
        assert row["score"]["docs"] == row["size"] and row["stats"]["n"] <= row["size"]
        assert row["stats"]["share"] == pytest.approx(row["stats_baseline"]["share"])
    ov = data["overlap"]
    assert ov["truth"] > 0 and ov["recall"] >= ov["exact_only_recall"] and ov["precision"] > 0.5
