"""``polytox compare-scorers`` and the agreement statistics behind it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from polytox.cli.main import main
from polytox.scoring.agreement import compare, confusion, pair_stats, roc_auc
from polytox.scoring.fake import FakeScorer


def test_auc_matches_sklearn_with_ties() -> None:
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(500), 1)  # many ties
    positive = rng.random(500) < scores
    assert roc_auc(scores, positive) == pytest.approx(roc_auc_score(positive, scores))
    assert roc_auc(scores, np.zeros(500, dtype=bool)) is None  # undefined, not 0.5


def test_pair_stats_and_confusion_match_direct_computation() -> None:
    rng = np.random.default_rng(1)
    b = rng.random(300)
    a = np.clip(b + rng.normal(0, 0.2, 300), 0, 1)
    s = pair_stats(a, b, 0.5, ">=")
    assert s["pearson"] == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert s["spearman"] == pytest.approx(stats.spearmanr(a, b)[0])
    assert s["mae"] == pytest.approx(np.abs(a - b).mean())
    c = confusion(a, b, 0.5)
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (
        int(((a >= .5) & (b >= .5)).sum()), int(((a >= .5) & (b < .5)).sum()),
        int(((a < .5) & (b >= .5)).sum()), int(((a < .5) & (b < .5)).sum()))
    assert confusion(np.array([0.5]), np.array([0.5]), 0.5, ">")["tn"] == 1  # the comparison is honoured


def test_compare_counts_missing_and_breaks_down_by_language() -> None:
    a = [0.9, 0.1, None, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4, 0.5, 0.95, 0.05]
    b = [0.1, 0.2, 0.3, None, 0.9, 0.8, 0.2, 0.7, 0.3, 0.6, 0.9, 0.1]
    langs = ["en"] * 6 + ["de"] * 6
    report = compare(a, b, langs, top=2, min_per_lang=3)
    assert (report["n_rows"], report["n_missing_a"], report["n_missing_b"]) == (12, 1, 1)
    assert report["overall"]["n"] == 10
    assert report["by_lang"]["en"]["n"] == 4 and report["by_lang"]["de"]["n"] == 6
    # Largest a - b first: row 0 (0.9 vs 0.1), then row 6 (0.3 vs 0.2)... and the other way: row 4.
    assert report["disagreements"]["a_high_b_low"][0] == 0
    assert report["disagreements"]["a_low_b_high"][0] == 4


def test_cli_scorer_vs_reference_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = [f"plain sentence {i}" if i % 3 else f"you idiot number {i}" for i in range(30)]
    fake = [s.get("toxicity") for s in FakeScorer().score(texts, ["en"] * 30)]
    refs = [None if i == 7 else round(min(1.0, (v or 0) + 0.05 * (i % 4)), 4) for i, v in enumerate(fake)]
    langs = ["en"] * 20 + ["de"] * 10
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"t{i}", "text": t, "lang": lang, "perspective": r}) + "\n"
                           for i, (t, lang, r) in enumerate(zip(texts, langs, refs, strict=True))),
                   encoding="utf-8")
    report_path = tmp_path / "report.json"
    assert main(["compare-scorers", "fake", "@perspective", "--input", str(src), "--top", "3", "--json",
                 "--report", str(report_path), "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(report_path.read_text())
    assert report["a"].startswith("fake@") and report["b"] == "@perspective"
    assert report["n_missing_b"] == 1 and report["overall"]["n"] == 29
    a = np.array([v for i, v in enumerate(fake) if i != 7])
    b = np.array([r for r in refs if r is not None])
    assert report["overall"]["pearson"] == pytest.approx(np.corrcoef(a, b)[0, 1])
    assert set(report["by_lang"]) == {"en", "de"}
    worst = report["disagreements"]["a_low_b_high"][0]
    diffs = {f"t{i}": (r - v) for i, (v, r) in enumerate(zip(fake, refs, strict=True))
             if r is not None and v is not None}
    assert worst["id"] == max(diffs, key=lambda k: diffs[k]) and worst["text"] in texts
    # The table form prints the same numbers.
    assert main(["compare-scorers", "fake", "@perspective", "--input", str(src), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "confusion at >= 0.5" in printed and "lang=de" in printed and "disagreements" in printed


def test_svm_agrees_with_stored_perspective_scores_on_rtp(shared_data: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The measured agreement of the English SVM with RTP's Perspective TOXICITY (prompts + continuations)."""
    assert main(["compare-scorers", "svm", "@toxicity", "--input", str(shared_data / "rtp"), "--json",
                 "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_rows"] == 2 * (1196 + 1200)  # prompt and continuation of every record
    assert report["n_missing_a"] == 0 and 0 < report["n_missing_b"] < 50  # a few null Perspective scores
    overall = report["overall"]
    assert overall["auc"] > 0.9 and overall["pearson"] > 0.75
    texts = {d["text"] for d in report["disagreements"]["a_low_b_high"]}
    assert len(texts) == 10


def test_lexicon_against_human_ratings_by_language(shared_data: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """RTP-LX: 1-5 human ratings mapped onto [0, 1]; a lexicon is a weak detector in every language."""
    assert main(["compare-scorers", "lexicon", "@Annotations.Toxicity[1:5]", "--input",
                 str(shared_data / "rtp-lx"), "--a-opt", f"dir={shared_data / 'ldnoobw'}", "--json",
                 "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["by_lang"]) == 17
    aucs = {lang: s["auc"] for lang, s in report["by_lang"].items()}
    assert all(a is not None and 0.45 < a < 0.8 for a in aucs.values()), aucs
