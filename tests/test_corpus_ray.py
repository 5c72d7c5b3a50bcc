"""Ray Data on a local CPU Ray: corpus scoring and the band-partitioned overlap equal the local runs."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox.corpus.overlap import build_index, query
from polytox.corpus.score import ScoreJob, run_score
from polytox.corpus.stats import compute_corpus_stats
from polytox.executors import ExecutorConfig
from polytox.promptset.readers import CorpusSource, FieldMap

from .corpus_helpers import NGRAM, planted_pair, write_corpus

pytest.importorskip("ray")
pytest.importorskip("sklearn")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

class Stop(Exception):
    pass


RAY = ExecutorConfig(kind="ray", score_workers=2, cpus_per_worker=0.5)


def test_ray_scoring_and_overlap_equal_the_local_runs(tmp_path: Path, shared_data: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", shared_data, 300)
    job = ScoreJob(source=CorpusSource(paths=(str(corpus),)), scorer="polytox-ml", scorer_options=NGRAM,
                   shard_size=50)
    run_score(job, str(tmp_path / "local"))

    def stop_after_one(done: int, shards: int) -> None:
        raise Stop

    with pytest.raises(Stop):  # a run started locally, killed after one shard, resumed on Ray
        run_score(job, str(tmp_path / "ray"), progress=stop_after_one)
    summary = run_score(job, str(tmp_path / "ray"), executor=RAY)
    assert summary.executor["executor"] == "ray" and summary.shards_scored == 5
    assert summary.shards_done_before == 1
    for i in range(6):
        name = f"part-{i:05d}.parquet"
        assert pq.read_table(tmp_path / "ray" / "parts" / name).equals(
            pq.read_table(tmp_path / "local" / "parts" / name))
    local_stats = compute_corpus_stats(str(tmp_path / "local"), n_boot=100)
    ray_stats = compute_corpus_stats(str(tmp_path / "ray"), n_boot=100)
    for key in ("share_toxic", "histogram", "by_length", "domains_most_toxic_documents"):
        assert ray_stats[key] == local_stats[key]

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    planted_pair(a, b, shared_data, n_a=300, n_exact=20, n_near=30, n_other=50)
    index = build_index(CorpusSource(paths=(str(a),)), FieldMap(), tmp_path / "idx")
    local = query(index, CorpusSource(paths=(str(b),)), FieldMap(), tmp_path / "ol", check_sample=0)
    ray = query(index, CorpusSource(paths=(str(b),)), FieldMap(), tmp_path / "or", check_sample=0, executor=RAY)
    assert ray["counts"] == local["counts"] and local["counts"]["near"] >= 25
    ray_rows = pq.read_table(tmp_path / "or" / "overlap.parquet")
    assert ray_rows.equals(pq.read_table(tmp_path / "ol" / "overlap.parquet"))
