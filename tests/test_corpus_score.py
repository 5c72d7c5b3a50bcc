"""``corpus score`` and ``corpus stats`` end to end on real shared texts: values, resume, SIGKILL, CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from polytox.corpus.score import ScoreJob, run_score
from polytox.corpus.stats import compute_corpus_stats
from polytox.errors import PolytoxError
from polytox.promptset.readers import CorpusSource, FieldMap
from polytox.scoring import build_scorer

from .core_helpers import cli_command, cli_env, run_cli_subprocess
from .corpus_helpers import NGRAM, write_corpus

pytest.importorskip("publicsuffixlist")
pytest.importorskip("sklearn")


class Stop(Exception):
    pass


def rows_by_location(out: Path) -> dict[str, dict[str, object]]:
    rows = pq.read_table(out / "parts").to_pylist()
    locations = [r["location"] for r in rows]
    assert len(locations) == len(set(locations)), "a document was written twice"
    return {str(r["location"]): r for r in rows}


def test_scores_equal_the_scorer_and_a_killed_run_resumes_exactly(tmp_path: Path, shared_data: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 300)
    job = ScoreJob(source=CorpusSource(paths=(str(corpus),)), scorer="polytox-ml", scorer_options=NGRAM,
                   shard_size=64, keep=("source",))
    ref = run_score(job, str(tmp_path / "ref"))
    assert ref.shards_total == 5 and ref.status_counts["ok"] == 300
    rows = rows_by_location(tmp_path / "ref")
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    direct = build_scorer("polytox-ml", NGRAM).score(texts, ["en"] * len(texts))
    got = [rows[f"{corpus}:{i + 1}"]["toxicity"] for i in range(len(texts))]
    assert np.allclose(got, [s.get("toxicity") for s in direct])
    assert rows[f"{corpus}:1"]["domain"] == "bbc.co.uk" and rows[f"{corpus}:1"]["meta_source"] == "toxichat"

    def stop_after_two(done: int, shards: int) -> None:
        if shards == 2:
            raise Stop

    with pytest.raises(Stop):
        run_score(job, str(tmp_path / "run"), progress=stop_after_two)
    assert len(list((tmp_path / "run" / "parts").glob("part-*.parquet"))) == 2
    again = run_score(job, str(tmp_path / "run"))
    assert again.resumed and again.shards_done_before == 2 and again.shards_scored == 3
    assert rows_by_location(tmp_path / "run") == rows
    other = ScoreJob(source=job.source, scorer="polytox-ml", scorer_options=NGRAM, shard_size=32)
    with pytest.raises(PolytoxError, match="other settings"):
        run_score(other, str(tmp_path / "run"))


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path: Path, shared_data: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 200)
    args = ["corpus", "score", str(corpus), "--scorer", "fake", "--scorer-opt", "delay=0.15",
            "--scorer-opt", "batch_size=10", "--shard-size", "20"]
    ref = run_cli_subprocess(tmp_path / "cache-ref", *args, "--out", str(tmp_path / "ref"))
    assert ref.returncode == 0, ref.stderr
    out = tmp_path / "run"
    proc = subprocess.Popen(cli_command(*args, "--out", str(out)), env=cli_env(tmp_path / "cache"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and len(list((out / "parts").glob("part-*.parquet"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "parts").glob("part-*.parquet")))
    assert 3 <= done < 10, "the kill did not land mid-run"
    resumed = run_cli_subprocess(tmp_path / "cache", *args, "--out", str(out), "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resumed"] and report["shards_done_before"] == done
    assert report["documents_scored_now"] == 200 - 20 * done
    assert rows_by_location(out) == rows_by_location(tmp_path / "ref")


def test_stats_values_match_the_parts(tmp_path: Path, shared_data: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 400)
    run_score(ScoreJob(source=CorpusSource(paths=(str(corpus),)), fields=FieldMap(), scorer="polytox-ml",
                       scorer_options=NGRAM, shard_size=100), str(tmp_path / "s"))
    stats = compute_corpus_stats(str(tmp_path / "s"), min_domain_docs=10)
    tox = np.array([r["toxicity"] for r in pq.read_table(tmp_path / "s" / "parts").to_pylist()])
    block = stats["share_toxic"]["toxicity"]
    assert block["n"] == 400 and block["toxic"] == int((tox >= 0.5).sum())
    assert block["ci"][0] < block["share"] < block["ci"][1] and block["ci"][1] - block["ci"][0] < 0.15
    assert sum(stats["histogram"]["counts"]) == 400
    assert stats["histogram"]["counts"][0] == int((tox < 0.05).sum())
    assert sum(r["n"] for r in stats["by_length"]) == 400
    assert stats["by_language"][0]["key"] == "en" and stats["n_domains"] == 6
    top = stats["domains_most_toxic_documents"]
    assert sum(r["toxic"] for r in top) == block["toxic"]  # 6 domains, all listed
    assert [r["toxic"] for r in top] == sorted((r["toxic"] for r in top), reverse=True)
    shares = [r["share"] for r in stats["domains_highest_toxic_share"]]
    assert shares == sorted(shares, reverse=True)


def test_cli_score_then_stats_writes_json_markdown_png(tmp_path: Path, shared_data: Path) -> None:
    rtp = shared_data / "rtp" / "toxic.jsonl"
    score = run_cli_subprocess(tmp_path / "cache", "corpus", "score", str(rtp), "--limit", "150",
                               "--text-field", "prompt.text", "--id-field", "filename", "--lang", "en",
                               "--scorer", "polytox-ml", "--scorer-opt", "mode=ngram", "--out",
                               str(tmp_path / "s"), "--json")
    assert score.returncode == 0, score.stderr
    assert json.loads(score.stdout)["status_counts"]["ok"] == 150
    stats = run_cli_subprocess(tmp_path / "cache", "corpus", "stats", str(tmp_path / "s"), "--format", "json")
    assert stats.returncode == 0, stats.stderr
    data = json.loads(stats.stdout)
    # RTP's toxic prompts have Perspective TOXICITY >= 0.5; the n-gram scorer agrees on most of them
    assert data["n_scored"] == 150 and data["share_toxic"]["toxicity"]["share"] > 0.5
    assert data["n_missing_url"] == 150
    for name in ("stats.json", "stats.md", "toxicity_hist.png"):
        assert (tmp_path / "s" / "stats" / name).stat().st_size > 100


@pytest.mark.slow
def test_streamed_hugging_face_dataset_gives_the_local_scores(tmp_path: Path, shared_data: Path) -> None:
    pytest.importorskip("datasets")
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 60)
    local = run_cli_subprocess(tmp_path / "cache", "corpus", "score", str(corpus), "--scorer", "polytox-ml",
                               "--scorer-opt", "mode=ngram", "--out", str(tmp_path / "local"), "--json")
    hf = run_cli_subprocess(tmp_path / "cache", "corpus", "score", "--hf-dataset", "json", "--hf-data-files",
                            str(corpus), "--scorer", "polytox-ml", "--scorer-opt", "mode=ngram", "--out",
                            str(tmp_path / "hf"), "--json")
    assert local.returncode == 0 and hf.returncode == 0, hf.stderr
    a = pq.read_table(tmp_path / "local" / "parts").to_pylist()
    b = pq.read_table(tmp_path / "hf" / "parts").to_pylist()
    assert [(r["doc_id"], r["domain"], r["toxicity"]) for r in a] == [(r["doc_id"], r["domain"], r["toxicity"])
                                                                      for r in b]
    assert b[0]["location"].startswith("hf://json/")


def test_corpus_score_reads_web_text_through_the_web_map(tmp_path: Path, shared_data: Path) -> None:
    """Corpus documents are web text: the CLI asks polytox-ml for its web-text map unless told otherwise."""
    from polytox.cli.main import main
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 60)
    base = ["corpus", "score", str(corpus), "--scorer", "polytox-ml", "--scorer-opt", "mode=ngram",
            "--scorer-opt", "cache=off", "--no-detect-lang"]
    assert main([*base, "--out", str(tmp_path / "web")]) == 0
    assert main([*base, "--scorer-opt", "text=continuation", "--out", str(tmp_path / "cont")]) == 0
    manifest = json.loads((tmp_path / "web" / "manifest.json").read_text())
    assert manifest["job"]["scorer_options"]["text"] == "web" and manifest["scorer"]["text"] == "web"
    web_rows, cont_rows = rows_by_location(tmp_path / "web"), rows_by_location(tmp_path / "cont")
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    expected = {"web": PolytoxMlScorer(mode="ngram", text="web"), "cont": PolytoxMlScorer(mode="ngram")}
    for name, rows in (("web", web_rows), ("cont", cont_rows)):
        got = [r["toxicity"] for r in sorted(rows.values(), key=lambda r: int(str(r["doc_id"])[1:]))]
        want = [s.get("toxicity") for s in expected[name].score(texts, ["en"] * len(texts))]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # the continuation map puts the same English texts lower (2022 Perspective on model text)
    assert np.mean([r["toxicity"] for r in cont_rows.values()]) < np.mean([r["toxicity"] for r in web_rows.values()])


def test_stats_of_all_attributes_in_rtp_table_12_layout(tmp_path: Path, shared_data: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Two corpora scored with several attributes (``attributes=rtp`` and ``ptp``): each attribute's toxic
    share equals the count in the parts, and ``corpus stats A B`` lays them out as RTP Table 12 does."""
    from polytox.cli.main import main

    rtp = shared_data / "rtp" / "toxic.jsonl"
    for name, field, limit, attrs in (("a", "prompt.text", "60", "rtp"), ("b", "continuation.text", "40", "ptp")):
        assert main(["corpus", "score", str(rtp), "--limit", limit, "--text-field", field, "--id-field", "filename",
                     "--lang", "en", "--scorer", "fake", "--scorer-opt", f"attributes={attrs}",
                     "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["corpus", "stats", str(tmp_path / "a"), str(tmp_path / "b"), "--no-plots",
                 "--out", str(tmp_path / "t")]) == 0
    table = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert list(rows)[2:] == ["TOXICITY", "SEVERE_TOXICITY", "PROFANITY", "SEXUALLY_EXPLICIT", "FLIRTATION",
                              "IDENTITY_ATTACK", "THREAT", "INSULT"]
    assert rows["FLIRTATION"].endswith("| - |")  # corpus b was scored with PTP's six: no FLIRTATION column
    for name, n in (("a", 60), ("b", 40)):
        parts = pq.read_table(tmp_path / name / "parts").to_pylist()
        stats = json.loads((tmp_path / name / "stats" / "stats.json").read_text())
        ptp = {"toxicity", "severe_toxicity", "identity_attack", "insult", "profanity", "threat"}
        assert set(stats["share_toxic"]) == ptp | ({"sexually_explicit", "flirtation"} if name == "a" else set())
        for attr, block in stats["share_toxic"].items():
            toxic = sum(1 for r in parts if r[attr] is not None and r[attr] >= 0.5)
            assert block["n"] == n and block["toxic"] == toxic
            assert f"{100 * block['share']:.2f}%" in rows[attr.upper()]
    assert json.loads((tmp_path / "t" / "table12.json").read_text())["corpora"][0]["share_toxic"]["threat"]["n"] == 60
