"""The attention-probe studies (research/scorer/attention_*_trial.py, probe_stability.py): their readings
and command lines, on synthetic bags."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from tests.test_attention import _bags


def test_rows_trial_reads_each_source_and_averages_the_real_ones() -> None:
    from research.scorer.attention_rows_trial import source_aucs

    labels = np.array([0, 1, 0, 1, 0, 1, 1, 1], dtype=bool)
    scores = np.array([0.1, 0.9, 0.8, 0.2, 0.3, 0.6, 0.5, 0.4])
    sources = np.array(["cold"] * 2 + ["told-br"] * 2 + ["templates-de"] * 2 + ["only-toxic"] * 2)
    out = source_aucs(labels, scores, sources)
    assert out["sources"] == {"cold": 1.0, "templates-de": 1.0, "told-br": 0.0}  # one class only: no AUC
    assert out["real_mean"] == 0.5  # the synthetic template set is reported, not averaged


def test_a_converged_float64_fit_is_stable_and_at_least_as_good() -> None:
    """probe_stability's measurement on synthetic bags: a float64 fit run to convergence barely moves with a
    last-bit change of its targets (what is left is the float32 storage's rounding) and reaches a penalised
    loss no higher than a float32 fit stopped early (read in float64). The float32 default is the head's
    fit. (These small bags do not show the early fit's amplification; the head's 463,093 tokens do.)"""
    import torch

    from polytox.scoring.ml.attention import _pooled_scores, _segments, _standardised, fit_attention_probe
    from research.scorer.probe_stability import perturbation

    rng = np.random.default_rng(3)
    states, offsets, toxic = _bags(rng, 500, dims=16)
    target = toxic + rng.normal(0, 0.1, len(toxic))
    weight = rng.uniform(0.3, 1.0, len(toxic))
    penalties = (10.0, 1.0)
    early = perturbation(states, offsets, target, weight, penalties, 1e-7, "float32", 8)
    converged = perturbation(states, offsets, target, weight, penalties, 1e-7, "float64", 500)
    assert converged.score_max < 1e-5 and converged.b < 1e-6

    def loss(probe: object) -> float:
        x = _standardised(states, probe.mean, probe.scale, "float64")  # type: ignore[attr-defined]
        seg = torch.from_numpy(_segments(offsets))
        scores = _pooled_scores(x, seg, len(target), torch.from_numpy(probe.v.astype(np.float64)),  # type: ignore[attr-defined]
                                torch.from_numpy(probe.w.astype(np.float64)), probe.b).numpy()  # type: ignore[attr-defined]
        return float((weight * (scores - target) ** 2).sum() + penalties[0] * (probe.w.astype(np.float64) ** 2).sum()  # type: ignore[attr-defined]
                     + penalties[1] * (probe.v.astype(np.float64) ** 2).sum())  # type: ignore[attr-defined]

    assert loss(converged.probe) <= loss(early.probe) + 1e-6
    head_fit = fit_attention_probe(states, offsets, target, *penalties, max_iter=8, weight=weight)
    assert head_fit.b == early.probe.b and np.array_equal(head_fit.v, early.probe.v)


def test_trial_cli_runs_only_the_named_variants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--only`` reaches the trial as ``only`` (and an unknown name is refused); without it, every variant."""
    from research.scorer.attention_trial import trial_cli

    calls: list[object] = []

    def run_trial(config: object, only: list[str] | None = None) -> dict[str, object]:
        calls.append(only)
        return {"ran": only or ["a", "b"]}

    out = tmp_path / "t.json"
    assert trial_cli(["--out", str(out), "--only", "b"], "", run_trial, lambda d: str(d["ran"]), ["a", "b"]) == 0
    assert calls == [["b"]] and json.loads(out.read_text()) == {"ran": ["b"]}
    trial_cli(["--out", str(out)], "", run_trial, lambda d: "", ["a", "b"])
    assert calls[-1] is None
    with pytest.raises(SystemExit):
        trial_cli(["--out", str(out), "--only", "c"], "", run_trial, lambda d: "", ["a", "b"])
