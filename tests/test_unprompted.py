"""Unprompted toxicity (RTP §3.1): the spec, the empty prompts, the bootstrap curve, the table and plot."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main
from polytox.errors import PolytoxError
from polytox.metrics.unprompted import bootstrap_curve, exact_expected_max, n_grid
from polytox.runner import execute_run as evaluate
from polytox.spec import spec_from_flat


def test_grid_is_1_2_5_up_to_the_pool() -> None:
    assert n_grid(1) == [1]
    assert n_grid(10) == [1, 2, 5, 10]
    assert n_grid(10_000) == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000]
    assert n_grid(1905)[-3:] == [500, 1000, 1905]


def test_closed_form_matches_enumeration() -> None:
    pool = np.array([0.1, 0.5, 0.9, 0.3])
    for n in (1, 2, 3):
        brute = np.mean([max(c) for c in itertools.product(pool, repeat=n)])
        assert exact_expected_max(np.sort(pool), n) == pytest.approx(brute)


def test_bootstrap_estimates_the_expected_maximum() -> None:
    rng = np.random.default_rng(1)
    pool = rng.beta(0.6, 3.0, size=3000)  # mostly low, a few high: the shape of real toxicity scores
    curve = bootstrap_curve(pool, n_grid(3000), n_resamples=1000, seed=7)
    assert [p.n for p in curve] == n_grid(3000)
    for p in curve:
        assert abs(p.emt - p.emt_exact) < 4 * p.std / np.sqrt(1000) + 1e-9, p
        assert p.lower == pytest.approx(p.emt - p.std) and p.ci_low <= p.emt <= p.ci_high
    emts = [p.emt for p in curve]
    assert emts == sorted(emts)  # more draws, higher expected maximum
    assert curve[0].emt == pytest.approx(pool.mean(), abs=0.02)  # n = 1: the mean toxicity
    assert bootstrap_curve(pool, [10], seed=7) == bootstrap_curve(pool, [10], seed=7)
    flat = bootstrap_curve(np.full(50, 0.25), [1, 10, 50])
    assert all(p.emt == 0.25 and p.std == 0.0 for p in flat)
    assert bootstrap_curve(np.array([]), [1]) == []


def test_spec_sets_one_sample_per_unprompted_generation() -> None:
    spec = spec_from_flat({"unprompted": 50, "preset": "rtp", "model": "fake"})
    assert spec.prompts.unprompted == 50 and spec.generation.samples == 1
    assert spec.generation.top_p == 0.9  # the rest of the preset stays
    with pytest.raises(PolytoxError, match="one sample each"):
        spec_from_flat({"unprompted": 50, "samples": 5})
    with pytest.raises(PolytoxError, match="unprompted must be >= 0"):
        spec_from_flat({"unprompted": -1})
    assert spec_from_flat({"unprompted": 50}).spec_hash() != spec_from_flat({"unprompted": 60}).spec_hash()


def test_unprompted_run_pools_scores_and_counts_failures(tmp_path: Path) -> None:
    spec = spec_from_flat({"unprompted": 300, "model": "fake", "scorer": "fake", "shard_size": 64,
                           "model_opt": ["fail_rate=0.1", "toxicity=0.03"], "max_new_tokens": 12})
    result = evaluate(spec, tmp_path / "run")
    prompts = pq.read_table(tmp_path / "run" / "prompts.parquet").to_pylist()
    assert len(prompts) == 300 and {p["text"] for p in prompts} == {""}
    assert prompts[0]["prompt_id"] == "unprompted:0000000"
    gens = pq.read_table(tmp_path / "run" / "generations").to_pylist()
    failed = sum(g["error"] is not None for g in gens)
    report = json.loads((tmp_path / "run" / "unprompted.json").read_text())
    assert report == result.metrics["unprompted"]
    assert 10 < failed <= report["n_missing_scores"] and report["pool"] + report["n_missing_scores"] == 300
    assert report["curve"][-1]["n"] == report["pool"] and report["n_resamples"] == 1000


def test_cli_eval_unprompted_prints_the_table_and_writes_the_plot(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for tox in ("0.01", "0.1"):
        out = tmp_path / f"tox{tox}"
        code = main(["eval", "--model", "fake", "--scorer", "fake", "--unprompted", "200", "--out", str(out),
                     "--model-opt", f"toxicity={tox}", "--max-new-tokens", "10", "--no-progress"])
        assert code == 0
        assert (out / "unprompted.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        runs.append(str(out))
    printed = capsys.readouterr().out
    assert "unprompted toxicity" in printed and "closed form" in printed
    plot = tmp_path / "both.svg"
    assert main(["unprompted", *runs, "--plot", str(plot), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert plot.read_text().count("<svg") == 1 and len(data["runs"]) == 2
    low, high = (r["curve"][-2]["emt"] for r in data["runs"].values())  # n = 100
    assert high > low  # the ruder fake model reaches higher expected maximum toxicity
    prompted = tmp_path / "prompted"
    main(["eval", "--model", "fake", "--scorer", "fake", "--limit", "4", "-k", "2", "--out", str(prompted),
          "--no-progress"])
    assert main(["unprompted", str(prompted)]) == 2
    assert "not an unprompted run" in capsys.readouterr().err
