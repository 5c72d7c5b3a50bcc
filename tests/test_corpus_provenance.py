"""``corpus provenance``: label tables with malformed rows, coverage, per-label shares, Spearman rho."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from polytox.corpus.documents import iter_docs
from polytox.corpus.provenance import load_labels, provenance
from polytox.corpus.score import ScoreJob, run_score
from polytox.errors import PolytoxError
from polytox.promptset.readers import CorpusSource, FieldMap

from .core_helpers import run_cli_subprocess
from .corpus_helpers import NGRAM, write_corpus

pytest.importorskip("publicsuffixlist")
pytest.importorskip("sklearn")
scipy_stats = pytest.importorskip("scipy.stats")


@pytest.fixture()
def scored(tmp_path: Path, shared_data: Path) -> Path:
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 600)
    out = tmp_path / "s"
    run_score(ScoreJob(source=CorpusSource(paths=(str(corpus),)), scorer="polytox-ml", scorer_options=NGRAM,
                       keep=("source",), shard_size=200), str(out))
    return out


def write_labels(tmp_path: Path) -> Path:
    path = tmp_path / "news.csv"
    path.write_text(
        "domain,reliability\n"
        "https://www.bbc.co.uk/,high\n"          # a URL cell: normalised to bbc.co.uk
        "news.example.com,mixed\n"              # a host: example.com
        "infowars.com,low\n"
        "cnn.com,high\n"
        "theonion.com,\n"                        # 6: missing label
        "co.uk,low\n"                            # 7: a public suffix, no domain
        "bbc.co.uk,low\n"                        # 8: conflicting label, first wins
        "a.com,b,c\n"                            # 9: extra field
        "foo.blogspot.com,low\n", encoding="utf-8")
    return path


def test_label_table_rows_are_normalised_and_bad_rows_reported(tmp_path: Path) -> None:
    path = write_labels(tmp_path)
    table = load_labels(path)
    assert table.labels == {"bbc.co.uk": "high", "example.com": "mixed", "infowars.com": "low", "cnn.com": "high",
                            "foo.blogspot.com": "low"}
    assert [p.split(": ")[0] for p in table.problems] == [f"{path}:{n}" for n in (6, 7, 8, 9)]
    assert table.rows == 9
    with pytest.raises(PolytoxError, match="no column"):
        load_labels(path, label_column="nope")


def test_provenance_shares_coverage_and_spearman(tmp_path: Path, scored: Path) -> None:
    table = load_labels(write_labels(tmp_path))
    result = provenance(str(scored), table, order=["low", "mixed", "high"], min_docs=5, n_boot=200)
    rows = pq.read_table(scored / "parts").to_pylist()
    labels = {r["doc_id"]: table.labels.get(r["domain"]) for r in rows}
    assert result["coverage"]["scored"] == 600
    assert result["coverage"]["matched"] == sum(v is not None for v in labels.values()) == 500  # 5 of 6 domains
    by = {b["key"]: b for b in result["by_label"]}
    for label in ("low", "mixed", "high", "(unlabelled)"):
        docs = [r for r in rows if (labels[r["doc_id"]] or "(unlabelled)") == label]
        assert by[label]["n"] == len(docs)
        assert by[label]["toxic"] == sum(r["toxicity"] >= 0.5 for r in docs)
    per_domain: dict[str, list[float]] = {}
    for r in rows:
        if labels[r["doc_id"]] is not None:
            per_domain.setdefault(r["domain"], []).append(r["toxicity"])
    rank = {"low": 0, "mixed": 1, "high": 2}
    xs = [rank[table.labels[d]] for d in per_domain]
    ys = [float(np.mean(np.array(v) >= 0.5)) for v in per_domain.values()]
    expected = scipy_stats.spearmanr(xs, ys).statistic
    assert result["spearman"]["n_keys"] == 5
    assert result["spearman"]["rho"] == pytest.approx(expected)


def test_metadata_key_with_a_txt_list_and_the_cli(tmp_path: Path, scored: Path) -> None:
    banned = tmp_path / "banned.txt"
    banned.write_text("# sources flagged\nToxiChat\n\n", encoding="utf-8")
    table = load_labels(banned, key="source")
    assert table.labels == {"toxichat": "listed"}
    result = provenance(str(scored), table, key="source", n_boot=100)
    corpus = CorpusSource(paths=(str(scored.parent / "c.jsonl"),))
    sources = [d.meta["source"] for d in iter_docs(corpus, FieldMap(), keep=("source",))]
    assert result["coverage"]["matched"] == sum(s == "toxichat" for s in sources)
    with pytest.raises(PolytoxError, match="no metadata column 'subreddit'"):
        provenance(str(scored), table, key="subreddit")
    cli = run_cli_subprocess(tmp_path / "cache", "corpus", "provenance", str(scored), "--labels",
                             str(write_labels(tmp_path)), "--order", "low,mixed,high", "--min-docs", "5")
    assert cli.returncode == 0, cli.stderr
    assert "Spearman rho" in cli.stdout and "news.csv:6" in cli.stderr
    assert (scored / "provenance" / "news.json").exists()
