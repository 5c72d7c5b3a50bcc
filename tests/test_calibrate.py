"""``polytox calibrate`` and ``calibration=FILE``: per-language isotonic maps, held-out report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polytox.cli.main import main
from polytox.errors import PolytoxError
from polytox.scoring import build_scorer
from polytox.scoring.calibrate import calibrate, held_out
from polytox.scoring.calibration import Calibration, IsotonicMap
from polytox.scoring.fake import FakeScorer


def synthetic(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """en: reference = local^2; de: reference = sqrt(local); plus noise. 'ko' is too small for its own map."""
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    langs = ["en"] * (n // 2) + ["de"] * (n // 2 - 50) + ["ko"] * 50
    lang_arr = np.array(langs)
    y = np.where(lang_arr == "en", x**2, np.sqrt(x)) + rng.normal(0, 0.03, n)
    return x, np.clip(y, 0, 1), langs


def test_per_language_maps_reduce_heldout_error() -> None:
    x, y, langs = synthetic()
    groups = [str(i) for i in range(len(x))]
    cal = calibrate(list(x), list(y), langs, groups, scorer="fake@1", reference="@ref", min_per_lang=200)
    assert set(cal.per_lang) == {"en", "de"}  # ko falls back to the global map
    held = cal.report["heldout"]
    for lang in ("en", "de"):
        before, after = held["by_lang"][lang]["before"], held["by_lang"][lang]["after"]
        assert after["mae"] < 0.5 * before["mae"]
        assert after["auc"] == pytest.approx(before["auc"], abs=0.02)  # monotone: the ranking is kept
    if "ko" in held["by_lang"]:
        assert held["by_lang"]["ko"]["map"] == "global"
    assert cal.per_lang["en"](np.array([0.5]))[0] == pytest.approx(0.25, abs=0.05)
    assert cal.per_lang["de"](np.array([0.25]))[0] == pytest.approx(0.5, abs=0.05)
    assert cal.report["n_train"] + cal.report["n_heldout"] == len(x)


def test_split_is_by_group_and_seeded() -> None:
    groups = [f"g{i // 3}" for i in range(3000)]  # three rows per group (e.g. translations of one prompt)
    mask = held_out(groups, 0.2, seed=0)
    for g in range(1000):
        assert len(set(mask[3 * g : 3 * g + 3])) == 1
    assert 0.15 < mask.mean() < 0.25
    assert (held_out(groups, 0.2, seed=0) == mask).all() and not (held_out(groups, 0.2, seed=1) == mask).all()


def test_too_few_pairs_is_an_error() -> None:
    with pytest.raises(PolytoxError, match="too few complete pairs"):
        calibrate([0.1, None, 0.3], [0.2, 0.3, None], ["en"] * 3, ["a", "b", "c"], scorer="s", reference="r")


def test_calibration_option_applies_to_any_scorer(tmp_path: Path) -> None:
    raw = build_scorer("fake", {"cache": "off"})
    cal = Calibration(scorer=raw.id, reference="@ref", attribute="toxicity",
                      global_map=IsotonicMap((0.0, 0.2, 1.0), (0.0, 0.6, 1.0)),
                      per_lang={"de": IsotonicMap((0.0, 1.0), (0.0, 0.5))})
    path = tmp_path / "cal.json"
    cal.save(path)
    scorer = build_scorer("fake", {"calibration": str(path)})
    texts, langs = ["you idiot", "calm day", "du Idiot", ""], ["en", "en", "de", "en"]
    raw_scores = FakeScorer().score(texts, langs)
    scores = scorer.score(texts, langs)
    assert scorer.id == f"{raw.id}+cal-{cal.digest}" and "toxicity_uncalibrated" in scorer.attributes
    for s, r, lang in zip(scores[:3], raw_scores[:3], langs, strict=False):
        value = r.get("toxicity")
        assert value is not None
        expected = np.interp(value, [0, 1], [0, 0.5]) if lang == "de" else np.interp(value, [0, 0.2, 1], [0, 0.6, 1])
        assert s.get("toxicity") == pytest.approx(expected) and s.get("toxicity_uncalibrated") == value
    assert scores[3].error is not None and scores[3].get("toxicity") is None  # errors stay errors


def test_calibration_for_another_scorer_or_a_broken_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    identity = IsotonicMap((0.0, 1.0), (0.0, 1.0))
    Calibration("svm@alt-profanity-check-1.9.1", "@toxicity", "toxicity", identity).save(path)
    with pytest.raises(PolytoxError, match="fitted for scorer 'svm@"):
        build_scorer("fake", {"calibration": str(path)})
    decreasing = {"x": [1, 0], "y": [0, 1]}
    path.write_text(json.dumps({"format": "polytox-calibration/1", "scorer": "x", "global": decreasing}))
    with pytest.raises(PolytoxError, match="not a polytox calibration file"):
        build_scorer("fake", {"calibration": str(path)})
    with pytest.raises(PolytoxError, match="calibration file not found"):
        build_scorer("fake", {"calibration": str(tmp_path / "missing.json")})


def test_cli_calibrates_svm_onto_rtp_perspective_scores(tmp_path: Path, shared_data: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "svm-to-perspective.json"
    assert main(["calibrate", "svm", "@toxicity", "--input", str(shared_data / "rtp"), "--out", str(out),
                 "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    overall = report["heldout"]["overall"]
    assert overall["after"]["mae"] < overall["before"]["mae"]
    assert abs(overall["after"]["toxic_rate"] - overall["after"]["toxic_rate_reference"]) < \
        abs(overall["before"]["toxic_rate"] - overall["before"]["toxic_rate_reference"])
    assert out.stat().st_size < 20_000
    cal = Calibration.load(out)
    assert cal.scorer.startswith("svm@") and cal.reference == "@toxicity" and set(cal.per_lang) == {"en"}

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"text": "what a stupid idiot", "lang": "en"}) + "\n", encoding="utf-8")
    scored = tmp_path / "scored.jsonl"
    assert main(["score", "--scorer", "svm", "--scorer-opt", f"calibration={out}", "--input", str(texts),
                 "--out", str(scored), "--no-progress"]) == 0
    row = json.loads(scored.read_text())
    assert row["toxicity"] == pytest.approx(float(cal.map_for("en")([row["toxicity_uncalibrated"]])[0]))
    assert "+cal-" in row["scorer"]
