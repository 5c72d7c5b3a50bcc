"""ΔEMT against a reference run, paired by prompt, with a seeded bootstrap interval."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polytox.analysis.paired import paired_emt_delta, prompt_max_toxicity
from polytox.store import RunStore
from polytox.types import Generation, Score


def _run(path: Path, tox: dict[str, list[float | None]], k: int) -> Path:
    store = RunStore(path)
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"scorer": {"id": "s@1"},
                                                    "spec": {"generation": {"samples": k}}}))
    gens = [Generation(prompt_id=p, sample_index=i, text="x", finish_reason="length")
            for p, vs in tox.items() for i in range(len(vs))]
    scores = [Score(values={"toxicity": v}) if v is not None else Score(error="E")
              for vs in tox.values() for v in vs]
    store.write_scores("s@1", 0, gens, scores, ["toxicity"])
    return path


def test_paired_delta_is_the_mean_per_prompt_change_with_a_bootstrap_interval(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base_max = rng.uniform(0.1, 0.9, 60)  # large prompt-to-prompt spread, small method effect
    base = {f"p{i}": [float(m), float(m) / 2, None] for i, m in enumerate(base_max)}
    lower = {f"p{i}": [float(m) - 0.05, 0.0, 0.0] for i, m in enumerate(base_max)}
    a, b = _run(tmp_path / "a", base, 3), _run(tmp_path / "b", lower, 3)
    assert prompt_max_toxicity(a)["p0"] == pytest.approx(base_max[0])  # failed scores are skipped
    d = paired_emt_delta(a, b)
    assert d is not None and d["n_prompts"] == 60
    assert d["delta"] == pytest.approx(-0.05) and d["ci_low"] == pytest.approx(-0.05)  # no paired spread
    # a noisy effect: the interval holds the mean, and excludes 0 only when it should
    noisy = {f"p{i}": [float(m) + float(e)] for i, (m, e) in enumerate(zip(base_max, rng.normal(0, 0.05, 60),
                                                                              strict=True))}
    n = paired_emt_delta(_run(tmp_path / "c", {k: [v[0]] for k, v in base.items()}, 1), _run(tmp_path / "d", noisy, 1))
    assert n is not None and n["ci_low"] < n["delta"] < n["ci_high"] and n["ci_low"] < 0 < n["ci_high"]
    assert paired_emt_delta(a, _run(tmp_path / "e", lower, 25)) is None  # another K: EMT is not comparable
    assert paired_emt_delta(a, tmp_path / "missing") is None


def test_paired_delta_splits_toxic_and_nontoxic_prompts_by_the_run_threshold(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    base_max = rng.uniform(0.1, 0.9, 40)
    base = {f"p{i}": [float(m)] for i, m in enumerate(base_max)}
    # the method lowers toxic prompts' maxima by 0.2 and leaves non-toxic prompts alone
    prompt_tox = {f"p{i}": (0.8 if i % 2 == 0 else 0.1) for i in range(40)}
    moved = {p: [v[0] - (0.2 if prompt_tox[p] >= 0.5 else 0.0)] for p, v in base.items()}
    a, b = _run(tmp_path / "a", base, 1), _run(tmp_path / "b", moved, 1)
    pq.write_table(pa.table({"prompt_id": list(prompt_tox), "toxicity": list(prompt_tox.values())}),
                   a / "prompts.parquet")
    d = paired_emt_delta(a, b)
    assert d is not None and d["delta"] == pytest.approx(-0.1)
    tox, non = d["by_group"]["toxic"], d["by_group"]["nontoxic"]
    assert tox["n_prompts"] == non["n_prompts"] == 20
    assert tox["delta"] == pytest.approx(-0.2) and tox["ci_high"] == pytest.approx(-0.2)
    assert non["delta"] == pytest.approx(0.0) and non["ci_low"] == pytest.approx(0.0)
    # a strict comparison at the threshold moves a prompt scored exactly 0.5 to the non-toxic side
    prompt_tox["p1"] = 0.5
    pq.write_table(pa.table({"prompt_id": list(prompt_tox), "toxicity": list(prompt_tox.values())}),
                   a / "prompts.parquet")
    assert paired_emt_delta(a, b)["by_group"]["toxic"]["n_prompts"] == 21  # type: ignore[index]
    manifest = json.loads((a / "manifest.json").read_text())
    manifest["spec"]["metrics"] = {"threshold": 0.5, "comparison": ">"}
    (a / "manifest.json").write_text(json.dumps(manifest))
    assert paired_emt_delta(a, b)["by_group"]["toxic"]["n_prompts"] == 20  # type: ignore[index]


@pytest.mark.parametrize("n", [1, 7, 150, 20_011])
def test_the_blocked_interval_is_bit_identical_to_the_textbook_bootstrap(n: int) -> None:
    from polytox.analysis import paired

    diff = np.random.default_rng(n).normal(0.0, 0.3, n)
    for n_boot, seed in ((2000, 0), (333, 5)):
        rng = np.random.default_rng(seed)
        means = diff[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)  # the whole (B x n) matrix at once
        low, high = np.percentile(means, [2.5, 97.5])
        got = paired._interval(diff, n_boot, seed)
        assert got == {"delta": float(diff.mean()), "ci_low": float(low), "ci_high": float(high), "n_prompts": n}


def test_compare_reads_each_run_once_and_keeps_the_deltas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from polytox.analysis import detox_compare, paired
    from polytox.analysis.paired import N_BOOTSTRAP

    rng = np.random.default_rng(3)
    runs = []
    for r in range(4):
        tox = {f"p{i}": [float(v) for v in rng.uniform(0, 1, 2)] for i in range(30)}
        path = _run(tmp_path / f"r{r}", tox, 2)
        (path / "metrics.json").write_text(json.dumps({"overall": {"n_generations": 60}}))
        runs.append(path)
    reads: list[str] = []
    real = paired.prompt_max_toxicity
    monkeypatch.setattr(paired, "prompt_max_toxicity", lambda run: reads.append(str(run)) or real(run))
    rows = detox_compare.compare(runs)
    assert sorted(reads) == sorted(str(r) for r in runs)  # once each, not once per pair
    expected = [paired._paired(runs[0], r, N_BOOTSTRAP, 0, {}) for r in runs[1:]]  # computed afresh
    assert [row.emt_delta for row in rows[1:]] == expected
    reads.clear()
    assert [row.emt_delta for row in detox_compare.compare(runs)[1:]] == expected  # kept: nothing read
    assert reads == []
    for r in runs:
        shutil.rmtree(r / "derived")
    given = {str(r): real(r) for r in runs}
    assert [row.emt_delta for row in detox_compare.compare(runs, maxima=given)[1:]] == expected
    assert reads == []


def test_a_kept_delta_is_recomputed_when_either_run_changes(tmp_path: Path) -> None:
    base = {f"p{i}": [0.5 + i / 100] for i in range(20)}
    a, b = _run(tmp_path / "a", base, 1), _run(tmp_path / "b", {p: [v[0] - 0.1] for p, v in base.items()}, 1)
    assert paired_emt_delta(a, b)["delta"] == pytest.approx(-0.1)  # type: ignore[index]
    assert len(list((b / "derived").glob("paired-*.json"))) == 1
    _run(tmp_path / "b2", {p: [v[0] - 0.3] for p, v in base.items()}, 1)
    for name in ("part-00000.parquet", ".part-00000.parquet.sha256"):  # b's scores replaced (a repair)
        (b / "scores" / "s_1" / name).write_bytes((tmp_path / "b2" / "scores" / "s_1" / name).read_bytes())
    assert paired_emt_delta(a, b)["delta"] == pytest.approx(-0.3)  # type: ignore[index]
    _run(tmp_path / "a2", {p: [v[0] - 0.3] for p, v in base.items()}, 1)
    for name in ("part-00000.parquet", ".part-00000.parquet.sha256"):  # and then the reference's
        (a / "scores" / "s_1" / name).write_bytes((tmp_path / "a2" / "scores" / "s_1" / name).read_bytes())
    assert paired_emt_delta(a, b)["delta"] == pytest.approx(0.0)  # type: ignore[index]
