"""``corpus overlap``: planted duplicates found, verdicts match exact Jaccard, the index persists."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox.corpus.overlap import OverlapIndex, build_index, exact_truth, query, toxic_split
from polytox.corpus.score import ScoreJob, run_score
from polytox.errors import PolytoxError
from polytox.promptset.dedup import jaccard, shingles
from polytox.promptset.readers import CorpusSource, FieldMap

from .core_helpers import run_cli_subprocess
from .corpus_helpers import NGRAM, planted_pair

pytest.importorskip("datasketch")


def brute_force(a_path: Path, b_path: Path, threshold: float = 0.9) -> dict[str, bool]:
    a_sets = [shingles(json.loads(line)["text"]) for line in a_path.read_text().splitlines()]
    out = {}
    for line in b_path.read_text().splitlines():
        rec = json.loads(line)
        s = shingles(rec["text"])
        out[rec["id"]] = any(threshold * len(s) <= len(t) <= len(s) / threshold and jaccard(s, t) >= threshold
                             for t in a_sets)
    return out


@pytest.fixture()
def pair(tmp_path: Path, shared_data: Path) -> tuple[Path, Path, dict[str, str]]:
    planted = planted_pair(tmp_path / "a.jsonl", tmp_path / "b.jsonl", shared_data)
    return tmp_path / "a.jsonl", tmp_path / "b.jsonl", planted


def test_planted_duplicates_are_found_and_every_verdict_is_exact(tmp_path: Path, pair: tuple) -> None:
    a, b, planted = pair
    index = build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    assert index.meta["indexed"] == 600 and (index.meta["bands"], index.meta["rows"]) == (10, 12)
    result = query(index, CorpusSource(paths=(str(b),)), FieldMap(), tmp_path / "out", check_sample=80)
    verdicts = {r["doc_id"]: r for r in pq.read_table(tmp_path / "out" / "overlap.parquet").to_pylist()}
    truth = brute_force(a, b)
    assert result["counts"]["exact"] == 60
    found = {k for k, v in verdicts.items() if v["verdict"] in ("exact", "near")}
    assert found <= {k for k, t in truth.items() if t}  # confirmed by exact Jaccard: no false positive
    planted_found = [k for k, kind in planted.items() if kind != "none" and k in found]
    assert len(planted_found) / 120 >= 0.97  # LSH at J ~0.97 with b=10, r=12 misses < 0.1%
    near = [v for v in verdicts.values() if v["verdict"] == "near"]
    assert all(0.9 <= v["jaccard"] < 1 for v in near) and all(v["a_doc_id"] for v in near)
    check = result["check"]
    assert check["sample"] == 80 and check["false_positives"] == 0
    assert check["lsh_overlap"] + check["false_negatives"] == check["true_overlap"]
    assert result["overlap"] == len(found) and result["overlap_share"] == pytest.approx(len(found) / 240)


def test_exact_check_equals_brute_force(tmp_path: Path, pair: tuple) -> None:
    a, b, _ = pair
    index = build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    b_recs = [json.loads(line) for line in b.read_text().splitlines()][50:150]  # exact, near and unrelated
    truth = brute_force(a, b)
    assert exact_truth(index, [r["text"] for r in b_recs], 0.9) == [truth[r["id"]] for r in b_recs]


def test_index_persists_and_is_reused(tmp_path: Path, pair: tuple) -> None:
    a, b, _ = pair
    build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    with pytest.raises(PolytoxError, match="already holds an index"):
        build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    first = query(OverlapIndex.load(tmp_path / "idx"), CorpusSource(paths=(str(b),)), FieldMap(), tmp_path / "o1",
                  check_sample=50)
    cli = run_cli_subprocess(tmp_path / "cache", "corpus", "overlap", str(b), "--index", str(tmp_path / "idx"),
                             "--out", str(tmp_path / "o2"), "--check-sample", "50", "--json")
    assert cli.returncode == 0, cli.stderr
    second = json.loads(cli.stdout)
    assert second["counts"] == first["counts"] and second["a_indexed"] == 600
    assert (pq.read_table(tmp_path / "o1" / "overlap.parquet").equals(
        pq.read_table(tmp_path / "o2" / "overlap.parquet")))


def test_toxic_share_inside_and_outside_the_overlap(tmp_path: Path, pair: tuple) -> None:
    pytest.importorskip("sklearn")
    a, b, _ = pair
    run_score(ScoreJob(source=CorpusSource(paths=(str(b),)), scorer="polytox-ml", scorer_options=NGRAM),
              str(tmp_path / "sb"))
    index = build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    query(index, CorpusSource(paths=(str(b),)), FieldMap(), tmp_path / "out", check_sample=10)
    split = toxic_split(tmp_path / "out", str(tmp_path / "sb"))
    scores = {r["doc_id"]: r["toxicity"] for r in pq.read_table(tmp_path / "sb" / "parts").to_pylist()}
    verdicts = {r["doc_id"]: r["verdict"] for r in pq.read_table(tmp_path / "out" / "overlap.parquet").to_pylist()}
    inside = [scores[k] for k, v in verdicts.items() if v in ("exact", "near")]
    outside = [scores[k] for k, v in verdicts.items() if v == "none"]
    assert split["inside"]["n"] == len(inside) and split["outside"]["n"] == len(outside) >= 110
    assert split["inside"]["toxic"] == sum(t >= 0.5 for t in inside)
    assert split["outside"]["toxic"] == sum(t >= 0.5 for t in outside)
