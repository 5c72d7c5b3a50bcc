"""``RunReader``: the read-only handle on a run directory. It has no method that writes, locks or repairs;
opening a run with it (or through ``open_run``, the metrics, the leaderboard) and reading everything leaves
every file and folder of the run as it was, except the numbers derived from the run (``RUN/derived/``),
which the readers keep by design (``_util.derived``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import polytox
from polytox.analysis import RunCollection
from polytox.analysis.leaderboard import build_leaderboard
from polytox.analysis.runs import load_runs
from polytox.errors import PolytoxError
from polytox.store import RunReader, RunStore, slug

WRITES = {
    "open",  # opens for writing: creates or resumes the run, rewrites the manifest
    "update_manifest",
    "write_prompts",
    "write_generations",
    "write_scores",
    "write_metrics",
    "remove_damaged",
    "remove_leftovers",
}


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under ``root`` (itself included): relative path -> (size, mtime_ns, inode)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            path = Path(folder) / name
            st = path.stat()
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reader") / "run"
    polytox.evaluate(model="fake", scorer="fake", prompts="demo", lang="en", limit=6, samples=2, shard_size=4, out=out)
    return out


def test_the_reader_has_no_writing_method_and_the_writer_reads_as_it_does() -> None:
    assert sorted(WRITES & set(dir(RunReader))) == []
    assert set(dir(RunStore)) >= WRITES and issubclass(RunStore, RunReader)


def test_reading_everything_with_the_reader_changes_nothing(run_dir: Path) -> None:
    before = snapshot(run_dir)
    reader = RunReader(run_dir)
    manifest = reader.check_readable()
    scorer = manifest["scorer"]["id"]
    sizes = reader.stored_plan(reader.spec())
    assert sizes is not None and [rows for rows, _ in sizes] == [8, 4]  # 6 prompts, shards of 4, 2 samples
    generations = [g for shard in range(len(sizes)) for g in reader.read_generations(shard)]
    errors = [e for shard in range(len(sizes)) for e in reader.read_score_errors(scorer, shard).values()]
    assert len(generations) == len(errors) == 12
    assert sum(e is not None for e in errors) == sum(not g.text for g in generations)  # empty texts: unscored
    assert reader.read_metrics()["overall"]["n_generations"] == 12
    assert reader.summaries()[0]["spec_hash"] == manifest["spec_hash"]
    assert reader.scorer_ids() == [slug(scorer)] and reader.recorded_spec() == manifest["spec"]
    assert reader.checksummed() and reader.unchecksummed_note() is None and reader.leftovers() == []
    assert reader.verify()[1] == []
    assert snapshot(run_dir) == before


def test_the_read_only_rooms_leave_the_run_as_it_was_but_its_derived_numbers(run_dir: Path) -> None:
    before = snapshot(run_dir)
    run = polytox.open_run(run_dir)
    assert len(run.prompts()) == 6 and len(run.generations()) == len(run.scores()) == 12
    assert run.failures.n_samples == 12 and run.metrics["overall"]["n_generations"] == 12
    assert run.metrics(threshold=0.0)["overall"]["ep"] == 1.0  # computed again: kept in RUN/derived/
    board = build_leaderboard(RunCollection(load_runs([run_dir])))
    assert [row.model for row in board.rows] == ["fake"]
    after = snapshot(run_dir)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    # only the kept numbers changed: the metrics computed again and the leaderboard's per-prompt table
    assert {k.split("-")[0] for k in changed} == {"derived", "derived/metrics", "derived/per_prompt"}, changed


def test_opening_what_is_not_a_run_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nothing"
    with pytest.raises(PolytoxError, match="is not a polytox run directory"):
        RunReader(missing).check_readable()
    with pytest.raises(PolytoxError, match="is not a polytox run directory"):
        polytox.open_run(missing)
    assert not missing.exists() and os.listdir(tmp_path) == []
