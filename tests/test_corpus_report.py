"""``polytox report RUNS --corpus SCORES``: the corpus statistics as a report section (HTML, Markdown, JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polytox.cli.main import main
from polytox.corpus.score import ScoreJob, run_score
from polytox.promptset.readers import CorpusSource
from polytox.runner import execute_run as evaluate

from .corpus_helpers import NGRAM, write_corpus
from .test_executors import fake_spec

pytest.importorskip("publicsuffixlist")
pytest.importorskip("sklearn")


def test_report_has_a_corpus_section(tmp_path: Path, shared_data: Path) -> None:
    evaluate(fake_spec(limit=8), tmp_path / "run")
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 120)
    run_score(ScoreJob(source=CorpusSource(paths=(str(corpus),)), scorer="polytox-ml", scorer_options=NGRAM),
              str(tmp_path / "s"))
    code = main(["report", str(tmp_path / "run"), "--corpus", str(tmp_path / "s"), "--out",
                 str(tmp_path / "r.html"), "--markdown", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json"),
                 "--no-plots"])
    assert code == 0
    html = (tmp_path / "r.html").read_text()
    assert f"Corpus toxicity: {corpus}" in html and "bbc.co.uk" in html
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["corpus"][0]["n_scored"] == 120
    share = data["corpus"][0]["share_toxic"]["toxicity"]
    assert f"{100 * share['share']:.2f}%" in (tmp_path / "r.md").read_text()
