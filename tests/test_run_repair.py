"""Damage is found and repaired (issue 46): a truncated generation or score part and an empty manifest, under
each in-process executor; the resumed run equals an uninterrupted one, a reader names the bad part in one
line, and ``eval --verify`` reports without changing anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox._util.checksum import sidecar
from polytox.cli.main import main
from polytox.store import RunStore

from .core_helpers import SMALL_FAKE_RUN, rewrite_part, run_cli_exit, run_contents, small_fake_runs


def truncate(path: Path, keep: int = 200) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:keep])


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One uninterrupted run per executor (made once, copied by each test)."""
    return small_fake_runs(tmp_path_factory.mktemp("clean"))


@pytest.mark.parametrize("executor", ["serial", "pipelined"])
@pytest.mark.parametrize("damage", ["generation", "score", "manifest", "all"])
def test_damage_then_resume_equals_an_uninterrupted_run(executor: str, damage: str, clean_runs: dict[str, Path],
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = clean_runs[executor]
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    store = RunStore(run)
    scorer_dir = next((run / "scores").iterdir())
    bad = []
    if damage in ("generation", "all"):
        truncate(store.generation_part(1))
        bad.append(store.generation_part(1))
    if damage in ("score", "all"):
        truncate(scorer_dir / "part-00002.parquet")
        bad.append(scorer_dir / "part-00002.parquet")
    if damage in ("manifest", "all"):
        store.manifest_path.write_text("")

    # a reader: one line naming the bad file, exit 2
    code, out, err = run_cli_exit(capsys, "metrics", str(run))
    named = store.manifest_path if damage in ("manifest", "all") else bad[0]
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"polytox: error: {named}") and f"repair it with: polytox eval --out {run}" in err

    # --verify: every damaged file listed, nothing changed
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    code, out, err = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
    assert code == 2 and err.startswith(f"polytox: error: {run}: {len(bad) + (damage in ('manifest', 'all'))} "
                                        "damaged file(s)")
    for path in bad:
        assert str(path) in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before

    # resume (the same command): repaired, exit 0, equal to the uninterrupted run
    code, out, err = run_cli_exit(capsys, "eval", "--out", str(run), "--executor", executor, *SMALL_FAKE_RUN)
    assert code == 0, err
    for path in bad:  # each part carries its checksum: a truncation is found by it
        assert f"repaired: {path.relative_to(run)} does not match its checksum" in err
    assert run_contents(run) == run_contents(clean)
    manifest = store.manifest()
    assert manifest["status"] == "complete"
    assert ("rebuilt_at" in manifest) == (damage in ("manifest", "all"))
    assert len(manifest.get("repairs", [{}])[0].get("parts", [])) == len(bad)
    code, out, _ = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
    assert code == 0 and "no damage found" in out


def test_retry_failed_rebuilds_a_damaged_manifest_from_the_recorded_spec(clean_runs: dict[str, Path], tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean_runs["serial"], run)
    (run / "manifest.json").write_text("{\"spec\": {")  # cut mid-write
    truncate(RunStore(run).generation_part(0))
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--retry-failed", "--no-progress", "--json")
    assert code == 0, err
    assert run_contents(run) == run_contents(clean_runs["serial"])


def test_a_part_of_another_spec_or_size_is_made_again(clean_runs: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A part that opens but is not this shard's (a copy from another run, rows cut) is damage too."""
    run = tmp_path / "run"
    shutil.copytree(clean_runs["serial"], run)
    store = RunStore(run)
    table = pq.read_table(store.generation_part(3))
    # fewer rows than 6 prompts x 3 samples, with a checksum of its own: the row count finds it
    rewrite_part(store.generation_part(3), table.slice(0, 5))
    shutil.copyfile(store.generation_part(0), store.generation_part(2))  # another shard's prompts,
    shutil.copyfile(sidecar(store.generation_part(0)), sidecar(store.generation_part(2)))  # checksum and all
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), *SMALL_FAKE_RUN)
    assert code == 0, err
    assert "generations/part-00003.parquet holds 5 row(s), 18 expected" in err
    assert "generations/part-00002.parquet holds other prompts than its shard" in err
    assert run_contents(run) == run_contents(clean_runs["serial"])


def test_a_damaged_manifest_without_a_recorded_spec_is_one_line(clean_runs: dict[str, Path], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A run written before specs were recorded in its parts: nothing to rebuild from, so one clear line."""
    run = tmp_path / "run"
    shutil.copytree(clean_runs["serial"], run)
    prompts = run / "prompts.parquet"
    pq.write_table(pq.read_table(prompts).replace_schema_metadata(None), prompts)
    for side in run.rglob("*.sha256"):  # nor checksums (they came later still)
        side.unlink()
    (run / "manifest.json").write_text("")
    code, out, err = run_cli_exit(capsys, "eval", "--out", str(run), *SMALL_FAKE_RUN)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{run}/manifest.json is damaged (empty file)" in err and f"delete {run} to start over" in err


@pytest.mark.slow
@pytest.mark.ray
def test_damage_then_resume_under_ray(clean_runs: dict[str, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The Ray Data executor resumes a damaged run to the same parts (repair runs before any executor): one
    flipped byte in each offset class (header, page, footer) of generation and score parts, and an empty
    manifest."""
    from .test_part_checksums import flip, offset_classes

    pytest.importorskip("ray")
    run = tmp_path / "run"
    shutil.copytree(clean_runs["serial"], run)
    store = RunStore(run)
    scores = next((run / "scores").iterdir())
    for part, where in ((store.generation_part(0), "header"), (store.generation_part(1), "page"),
                        (scores / "part-00002.parquet", "footer"), (scores / "part-00003.parquet", "page")):
        flip(part, offset_classes(part)[where][-1])
    store.manifest_path.write_text("")
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--executor", "ray", "--workers", "1",
                       "--cpus-per-worker", "0.5", *SMALL_FAKE_RUN)
    assert code == 0, err
    assert run_contents(run) == run_contents(clean_runs["serial"])


def test_metrics_of_an_unfinished_run_says_so(clean_runs: dict[str, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A run stopped after its first shard (Ctrl-C): the table comes with a note, as leaderboard's does."""
    run = tmp_path / "run"
    shutil.copytree(clean_runs["serial"], run)
    for shard in (1, 2, 3):
        RunStore(run).generation_part(shard).unlink()
        next((run / "scores").iterdir()).joinpath(f"part-{shard:05d}.parquet").unlink()
    code, out, err = run_cli_exit(capsys, "metrics", str(run), "--json")
    assert code == 0
    assert "note: the run is incomplete (1 of 4 shard(s) scored, status complete)" in " ".join(err.split())
    assert '"shards_scored": 1' in out
    code, out, err = run_cli_exit(capsys, "metrics", str(clean_runs["serial"]))
    assert code == 0 and "incomplete" not in err


def test_corpus_score_rescored_a_damaged_part(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              caplog: pytest.LogCaptureFixture) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(f'{{"id": "d{i}", "text": "document number {i} is here", "lang": "en"}}\n'
                            for i in range(30)))
    argv = ["corpus", "score", str(docs), "--scorer", "fake", "--shard-size", "10", "--json"]
    assert main([*argv, "--out", str(tmp_path / "clean")]) == 0
    shutil.copytree(tmp_path / "clean", tmp_path / "run")
    truncate(tmp_path / "run" / "parts" / "part-00001.parquet")
    code, _, err = run_cli_exit(capsys, *argv, "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert "repaired:" in caplog.text and "part-00001.parquet does not open" in caplog.text
    for i in range(3):
        name = f"parts/part-{i:05d}.parquet"
        assert pq.read_table(tmp_path / "run" / name).equals(pq.read_table(tmp_path / "clean" / name))
