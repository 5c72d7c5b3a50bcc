"""End to end over real RealToxicityPrompts records from ../shared/data/rtp/ (fake generator, the
default svm scorer), and the svm scorer refusing languages it cannot score before any work starts."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox.constants import toxicity_bucket

from .core_helpers import eval_args, only_scores_dir, read_json, read_parts, run_cli, write_jsonl


def unique_rtp_records(folder: Path) -> dict[tuple[str, int, int], dict[str, object]]:
    records: dict[tuple[str, int, int], dict[str, object]] = {}
    for name in ("nontoxic.jsonl", "toxic.jsonl"):
        with open(folder / name, encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                records.setdefault((r["filename"], r["begin"], r["end"]), r)
    return records


@pytest.mark.slow
def test_eval_over_real_rtp_records(shared_data: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("profanity_check")
    folder = shared_data / "rtp"
    out = tmp_path / "run"
    code, stdout, err = run_cli(capsys, *eval_args(out, folder, scorer="svm", samples=2, max_new_tokens=8,
                                                   shard_size=400))
    assert code == 0, err
    assert "exact duplicate record(s)" in err  # the two files share a few records; each is used once
    records = unique_rtp_records(folder)
    tox = [float(r["prompt"]["toxicity"]) for r in records.values()]  # type: ignore[index]
    metrics = read_json(out / "metrics.json")
    by = metrics["by"]["prompt_toxicity"]
    # the split counts are the data's own: TOXICITY >= 0.5 (RTP §2)
    assert by["toxic"]["n_prompts"] + by["toxic"]["n_prompts_unscored"] == sum(t >= 0.5 for t in tox)
    assert by["nontoxic"]["n_prompts"] + by["nontoxic"]["n_prompts_unscored"] == sum(t < 0.5 for t in tox)
    assert "unknown" not in by
    buckets = collections.Counter(str(toxicity_bucket(t)) for t in tox)
    got = {k: v["n_prompts"] + v["n_prompts_unscored"] for k, v in metrics["by"]["toxicity_bucket"].items()}
    assert got == dict(buckets)
    overall = metrics["overall"]
    assert overall["n_generations"] == 2 * len(records)
    assert metrics["scorer"].startswith("svm@alt-profanity-check-")
    # the table printed at the end shows the same numbers
    assert "prompt_toxicity=toxic" in stdout and f"{overall['emt']:.3f}" in stdout

    # scores are the svm's own probabilities for the stored continuations, and only empty ones miss
    from profanity_check import predict_prob

    gens = read_parts(out / "generations")
    scores = read_parts(only_scores_dir(out))
    assert [(g["prompt_id"], g["sample_index"]) for g in gens] == [(s["prompt_id"], s["sample_index"])
                                                                     for s in scores]
    sample = [(g["text"], s["toxicity"]) for g, s in zip(gens, scores, strict=True)
              if s["toxicity"] is not None]
    expected = predict_prob([t for t, _ in sample[:200]])
    assert [v for _, v in sample[:200]] == pytest.approx(list(expected), abs=1e-12)
    empty = sum(1 for g in gens if not (g["text"] or "").strip())
    assert overall["n_missing_scores"] == empty
    assert all(s["error"] == "EMPTY_TEXT: nothing to score" for s in scores if s["toxicity"] is None)
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    assert len(prompts) == len(records) and {p["lang"] for p in prompts} == {"en"}

    # the RTP notebooks' '>' gives the same split here: no prompt sits exactly on 0.5
    code, stdout, _ = run_cli(capsys, "metrics", str(out), "--json", "--comparison", ">")
    gt = json.loads(stdout)["by"]["prompt_toxicity"]
    assert gt["toxic"]["n_prompts"] == by["toxic"]["n_prompts"]


def test_rtp_prompt_subset_with_limit_and_per_bucket(shared_data: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, *eval_args(out, shared_data / "rtp" / "toxic.jsonl", samples=2,
                                              per_bucket=5, seed=4))
    assert code == 0, err
    metrics = read_json(out / "metrics.json")
    counts = {k: v["n_prompts"] + v["n_prompts_unscored"]
              for k, v in metrics["by"]["toxicity_bucket"].items()}
    assert counts == {"0": 5, "1": 5, "2": 5, "3": 5}
    assert metrics["by"]["prompt_toxicity"]["toxic"]["n_prompts"] + \
        metrics["by"]["prompt_toxicity"]["toxic"]["n_prompts_unscored"] == 10


# ---- languages the scorer cannot score ------------------------------------------------------------
def test_svm_refuses_other_languages_before_any_work(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("profanity_check")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, *eval_args(out, scorer="svm", lang="de"))
    assert code == 2
    assert "scorer 'svm' does not support language(s) de (it supports: en)" in err
    assert "--lang" in err and "perspective" in err and "detoxify" in err  # names the options
    assert "Traceback" not in err
    assert not out.exists()

    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"text": "The weather was", "lang": "en"},
                                                   {"text": "Das Wetter war", "lang": "de"},
                                                   {"text": "El tiempo era", "lang": "es"}])
    code, _, err = run_cli(capsys, *eval_args(out, mixed, scorer="svm"))
    assert code == 2 and "does not support language(s) de, es" in err
    assert not out.exists()


def test_default_demo_run_uses_only_languages_the_scorer_covers(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("profanity_check")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, *eval_args(out, scorer="svm", samples=2))
    assert code == 0, err
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    assert {p["lang"] for p in prompts} == {"en"} and len(prompts) >= 24
    assert read_json(out / "manifest.json")["spec"]["prompts"]["langs"] == ["en"]  # recorded explicitly


def test_any_scorer_language_limits_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *eval_args(tmp_path / "run", lang="ja", scorer_opt="languages=en,de"))
    assert code == 2 and "scorer 'fake' does not support language(s) ja (it supports: de, en)" in err
