"""Damage that keeps a file's shape is found and repaired, and no reader reads a damaged run as data.

The flip sweep flips single bytes of a generation part and a score part in every byte-offset class of a
Parquet file (header: the file magic and each column chunk's page header; page: the middle of each column
chunk's data; footer: the Thrift metadata, its length and the closing magic). Every flip must be named by
``eval --verify`` and by a reader (exit 2, one line), and ``polytox eval --out RUN`` must repair it to the
uninterrupted run's parts and ``metrics.json``, under the serial and the pipelined executor (Ray: the
``slow`` test of ``test_run_repair.py``, which flips one byte per class as well).
The reader sweep runs every reader (``metrics``, ``leaderboard``, ``report``, ``analyze``, ``open_run``) on
every damage case: one ``polytox: error:`` line naming the damaged file and the repair, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox import open_run
from polytox._util import checksum, verified
from polytox._util.checksum import file_sha256, sidecar
from polytox.cli.main import main
from polytox.errors import DamagedRunError
from polytox.store import RunStore

from .core_helpers import SMALL_FAKE_RUN, run_cli_exit, run_contents, small_fake_runs


def one_error_line(code: int, out: str, err: str, named: Path, run: Path) -> None:
    """Exit 2, nothing on stdout, one stderr line naming ``named`` and the repair command, no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and "Traceback" not in err, (code, err)
    assert len(lines) == 1 and lines[0].startswith(f"polytox: error: {named} "), err
    assert lines[0].endswith(f"repair it with: polytox eval --out {run}"), err


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def offset_classes(path: Path) -> dict[str, list[int]]:
    """Byte offsets of a Parquet file by class: header (file magic, each column chunk's page header), page
    (the middle of each column chunk's data) and footer (the metadata, its length, the closing magic)."""
    data = path.read_bytes()
    size = len(data)
    footer_len = int.from_bytes(data[-8:-4], "little")
    footer = size - 8 - footer_len
    header, page = [1], []
    meta = pq.read_metadata(path)
    for rg in range(meta.num_row_groups):
        for col in range(meta.num_columns):
            chunk = meta.row_group(rg).column(col)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            header.append(start + 1)
            page.append(start + chunk.total_compressed_size // 2)
    assert all(4 <= o < footer for o in header[1:] + page)
    return {"header": header, "page": page, "footer": [footer + 2, footer + footer_len // 2, size - 6, size - 2]}


@pytest.fixture(scope="module")
def clean_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One uninterrupted run per in-process executor (made once, copied by each test)."""
    runs = small_fake_runs(tmp_path_factory.mktemp("clean"))
    runs["seed7"] = runs["serial"].parent / "seed7"
    assert main(["eval", "--out", str(runs["seed7"]), "--seed", "7", *SMALL_FAKE_RUN]) == 0
    return runs


def copy(clean: Path, tmp_path: Path) -> tuple[Path, RunStore, Path]:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    return run, RunStore(run), next((run / "scores").iterdir())


def test_every_part_has_its_checksum(clean_runs: dict[str, Path]) -> None:
    run = clean_runs["serial"]
    parts = sorted(run.rglob("*.parquet"))
    assert len(parts) == 1 + 4 + 4  # prompts, 4 generation parts, 4 score parts
    for part in parts:
        assert sidecar(part).read_text() == f"{file_sha256(part)}  {part.name}\n"
    assert json.loads((run / "manifest.json").read_text())["checksums"] == "sha256"
    # a dataset reader given a folder skips the checksum files (their names start with a dot)
    assert pq.read_table(run / "generations").num_rows == 24 * 3


def test_flip_sweep_every_flip_is_named_by_verify_and_by_a_reader(clean_runs: dict[str, Path], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Every byte-offset class of a generation and a score part: ``--verify`` lists the part, ``metrics``
    refuses in one line, and nothing is changed by either."""
    run, store, scores = copy(clean_runs["serial"], tmp_path)
    tried = 0
    for part in (store.generation_part(1), scores / "part-00002.parquet"):
        original = part.read_bytes()
        for offsets in offset_classes(part).values():
            for offset in offsets:
                flip(part, offset)
                code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
                assert code == 2 and f"  {part} does not match its checksum" in err, (offset, err)
                one_error_line(*run_cli_exit(capsys, "metrics", str(run)), part, run)
                assert part.read_bytes() != original  # verify and metrics changed nothing
                part.write_bytes(original)
                tried += 1
    assert tried >= 2 * (1 + 4 + 4)
    assert run_cli_exit(capsys, "eval", "--out", str(run), "--verify")[0] == 0


@pytest.mark.parametrize("executor", ["serial", "pipelined"])
@pytest.mark.parametrize("kind", ["generation", "score"])
def test_flip_then_resume_equals_an_uninterrupted_run(executor: str, kind: str, clean_runs: dict[str, Path],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One flip per offset class at once (three shards), repaired by ``polytox eval --out RUN`` alone (the spec
    comes from the run) to the uninterrupted run's parts and metrics."""
    clean = clean_runs[executor]
    run, store, scores = copy(clean, tmp_path)
    parts = [store.generation_part(i) if kind == "generation" else scores / f"part-{i:05d}.parquet" for i in (0, 1, 3)]
    for part, offsets in zip(parts, ("header", "page", "footer"), strict=True):
        flip(part, offset_classes(part)[offsets][-1])
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--executor", executor, "--no-progress", "--json")
    assert code == 0, err
    for part in parts:
        assert f"repaired: {part.relative_to(run)} does not match its checksum" in err
    assert run_contents(run) == run_contents(clean)
    assert run_cli_exit(capsys, "eval", "--out", str(run), "--verify")[0] == 0


# ---- the reader sweep ------------------------------------------------------------------------------------
def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def _swap_in(target: Path, source: Path) -> None:
    """``target`` replaced by ``source``, checksum file and all (its checksum matches: the ids must not)."""
    shutil.copyfile(source, target)
    shutil.copyfile(sidecar(source), sidecar(target))


def _edit_manifest(store: RunStore, **fields: object) -> None:
    data = json.loads(store.manifest_path.read_text())
    store.manifest_path.write_text(json.dumps({**data, **fields}))


def _edit_spec(store: RunStore, section: str | None, name: str, value: object, digest: bool = True) -> None:
    """One field of the manifest's spec edited by hand (``digest=False``: its checksum dropped too, as in a
    manifest written before manifests carried one, so only the spec ``prompts.parquet`` recorded finds it)."""
    data = json.loads(store.manifest_path.read_text())
    (data["spec"][section] if section else data["spec"])[name] = value
    if not digest:
        del data["manifest_sha256"]
        data["polytox_run"] = 1
    store.manifest_path.write_text(json.dumps(data))


def _edit_nested(store: RunStore, section: str, name: str, value: object) -> None:
    data = json.loads(store.manifest_path.read_text())
    data[section][name] = value
    store.manifest_path.write_text(json.dumps(data))


def _edit_metrics(store: RunStore) -> None:
    data = json.loads(store.metrics_path.read_text())
    data["overall"]["emt"] = 0.01
    store.metrics_path.write_text(json.dumps(data, indent=2) + "\n")


def damage_cases(run: Path) -> dict[str, tuple[Callable[[], None], Path]]:
    """Name -> (do the damage, the file the error line must name)."""
    store = RunStore(run)
    scores = min((run / "scores").glob("*"), default=run / "scores" / "none")
    gen1, score2 = store.generation_part(1), scores / "part-00002.parquet"
    stray = store.generation_part(9)
    manifest = store.manifest_path
    other_seed = run.parent / "seed7" / "prompts.parquet"  # the same prompts, recorded for another spec
    return {
        "generation truncated": (lambda: _truncate(gen1), gen1),
        "generation empty": (lambda: gen1.write_bytes(b""), gen1),
        "score byte flipped": (lambda: flip(score2, offset_classes(score2)["page"][2]), score2),
        "prompts truncated": (lambda: _truncate(store.prompts_path), store.prompts_path),
        "prompts missing": (lambda: store.prompts_path.unlink(), store.prompts_path),
        "generation of another shard": (lambda: _swap_in(gen1, store.generation_part(0)), gen1),
        "score of another shard": (lambda: _swap_in(score2, scores / "part-00000.parquet"), score2),
        "generation deleted, score kept": (lambda: gen1.unlink(), scores / "part-00001.parquet"),
        "a part past the last shard": (lambda: _swap_in(stray, store.generation_part(0)), stray),
        "manifest {}": (lambda: store.manifest_path.write_text("{}"), store.manifest_path),
        "manifest empty": (lambda: store.manifest_path.write_text(""), store.manifest_path),
        "manifest scorer not an object": (lambda: _edit_manifest(store, scorer="x"), store.manifest_path),
        # the spec edited by hand: the manifest's checksum finds it, and without one the recorded spec does
        "manifest K 3->2": (lambda: _edit_spec(store, "generation", "samples", 2), manifest),
        "manifest seed": (lambda: _edit_spec(store, None, "seed", 99), manifest),
        "manifest temperature": (lambda: _edit_spec(store, "generation", "temperature", 0.5), manifest),
        "manifest model": (lambda: _edit_spec(store, "generation", "model", "fake:other"), manifest),
        "manifest shard size": (lambda: _edit_spec(store, None, "shard_size", 4), manifest),
        "manifest scorer name": (lambda: _edit_spec(store, "scorer", "name", "lexicon"), manifest),
        "old manifest K 3->2": (lambda: _edit_spec(store, "generation", "samples", 2, digest=False), manifest),
        "old manifest shard size": (lambda: _edit_spec(store, None, "shard_size", 4, digest=False), manifest),
        "old manifest top-level seed": (lambda: _edit_manifest(store, seed=99, manifest_sha256=None, polytox_run=1),
                                        manifest),
        "manifest top-level seed": (lambda: _edit_manifest(store, seed=99), manifest),
        "manifest threshold": (lambda: _edit_spec(store, "metrics", "threshold", 0.9), manifest),
        "manifest n_bootstrap": (lambda: _edit_spec(store, "metrics", "n_bootstrap", 10), manifest),
        "manifest scorer id": (lambda: _edit_nested(store, "scorer", "id", "fake@2-deadbeef"), manifest),
        "manifest checksum dropped": (lambda: _edit_manifest(store, manifest_sha256=None), manifest),
        "old manifest seed": (lambda: _edit_spec(store, None, "seed", 99, digest=False), manifest),
        "manifest missing": (lambda: store.manifest_path.unlink(), manifest),
        "metrics.json empty": (lambda: store.metrics_path.write_text(""), store.metrics_path),
        "metrics.json truncated": (lambda: store.metrics_path.write_text(store.metrics_path.read_text()[:50]),
                                   store.metrics_path),
        "metrics.json byte flipped": (lambda: flip(store.metrics_path, 40), store.metrics_path),
        "metrics.json emt edited": (lambda: _edit_metrics(store), store.metrics_path),
        "metrics.json checksum missing": (lambda: sidecar(store.metrics_path).unlink(), store.metrics_path),
        "prompts checksum missing": (lambda: sidecar(store.prompts_path).unlink(), store.prompts_path),
        "prompts of another seed's run": (lambda: _swap_in(store.prompts_path, other_seed), store.prompts_path),
    }


DAMAGES = list(damage_cases(Path("/nowhere")))
READERS = ["metrics", "leaderboard", "report", "analyze", "open_run"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_reader_on_every_damage_is_one_line_then_the_repair_gives_the_clean_run(
    damage: str, clean_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = clean_runs["serial"]
    run, _, _ = copy(clean, tmp_path)
    shutil.copytree(clean_runs["seed7"], tmp_path / "seed7")  # the same prompts, made with another seed
    do, named = damage_cases(run)[damage]
    do()
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for reader in READERS:
        if reader == "open_run":
            with pytest.raises(DamagedRunError) as info:
                open_run(run).metrics()
            assert str(info.value).startswith(f"{named} ") and f"polytox eval --out {run}" in str(info.value)
            continue
        argv = {"metrics": ["metrics", str(run)],
                "leaderboard": ["leaderboard", str(run)],
                "report": ["report", str(run), "--out", str(tmp_path / "r.html"), "--no-plots"],
                "analyze": ["analyze", "language", str(run), "--no-plot"]}[reader]
        one_error_line(*run_cli_exit(capsys, *argv), named, run)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # readers change nothing
    assert not (tmp_path / "r.html").exists()
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
    assert code == 2 and str(named) in err
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--no-progress", "--json")
    assert code == 0, err
    assert run_contents(run) == run_contents(clean)
    assert run_cli_exit(capsys, "metrics", str(run), "--json")[0] == 0
    assert run_cli_exit(capsys, "eval", "--out", str(run), "--verify")[0] == 0  # checksums restored too


def test_metrics_defaults_to_the_runs_own_bootstrap_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert main(["eval", "--out", str(run), "--seed", "7", *SMALL_FAKE_RUN]) == 0
    stored = json.loads((run / "metrics.json").read_text())
    code, out, _ = run_cli_exit(capsys, "metrics", str(run), "--json")
    assert code == 0
    assert json.loads(out)["overall"] == stored["overall"]
    code, out, _ = run_cli_exit(capsys, "metrics", str(run), "--json", "--seed", "0")
    assert json.loads(out)["overall"]["emt_ci"] != stored["overall"]["emt_ci"]


def test_a_run_made_before_checksums_says_so_once_and_is_checked_by_structure(
    clean_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = clean_runs["serial"]
    run, store, _ = copy(clean, tmp_path)
    for side in run.rglob(".*.sha256"):
        side.unlink()
    manifest = json.loads(store.manifest_path.read_text())
    del manifest["checksums"], manifest["manifest_sha256"]  # nor did its manifest carry one
    store.manifest_path.write_text(json.dumps({**manifest, "polytox_run": 1}))
    code, out, err = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
    assert code == 0 and out.count("made before part checksums were kept: 8 part(s)") == 1, out
    code, _, err = run_cli_exit(capsys, "metrics", str(run), "--json")
    assert code == 0 and " ".join(err.split()).count("made before part checksums were kept: 8 part(s)") == 1
    _truncate(store.generation_part(2))  # structure checks still find a torn part
    one_error_line(*run_cli_exit(capsys, "metrics", str(run)), store.generation_part(2), run)
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--no-progress", "--json")
    assert code == 0, err
    assert "generations/part-00002.parquet does not open" in err
    assert " ".join(err.split()).count("made before part checksums were kept: 6 part(s)") == 1  # shard 2 has them now
    assert run_contents(run) == run_contents(clean)


def test_a_copy_without_dot_files_is_repaired_once_and_for_all(clean_runs: dict[str, Path], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``cp -r RUN/* NEW/`` leaves the top-level checksum files behind: the repair derives the prompts again,
    compares them and restores their checksum (no part is made again), recomputes metrics.json, and then
    every reader reads the copy."""
    clean = clean_runs["serial"]
    new = tmp_path / "new"
    new.mkdir()
    for item in clean.iterdir():
        if not item.name.startswith("."):
            (shutil.copytree if item.is_dir() else shutil.copy)(item, new / item.name)
    assert not sidecar(new / "prompts.parquet").exists()
    one_error_line(*run_cli_exit(capsys, "metrics", str(new)), new / "prompts.parquet", new)
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(new), "--no-progress", "--json")
    assert code == 0, err
    repaired = [line for line in err.splitlines() if line.startswith("repaired: ")]
    assert repaired == ["repaired: prompts.parquet has no checksum: its rows equal the prompts derived again; "
                        "checksum restored"], err
    assert sidecar(new / "prompts.parquet").read_text() == sidecar(clean / "prompts.parquet").read_text()
    assert run_contents(new) == run_contents(clean)
    assert run_cli_exit(capsys, "eval", "--out", str(new), "--verify")[0] == 0
    assert run_cli_exit(capsys, "metrics", str(new), "--json")[0] == 0
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(new), "--no-progress", "--json")
    assert code == 0 and "repaired" not in err  # the loop ends: nothing left to repair


def test_leftover_temporary_files_are_reported_by_verify_and_removed_by_the_resume(
    clean_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _, scores = copy(clean_runs["serial"], tmp_path)
    left = [run / "generations" / ".tmp-part-00001.parquet-k2j3", scores / ".tmp-.part-00002.parquet.sha256-x9",
            run / ".tmp-manifest.json-a1"]
    for path in left:
        path.write_bytes(b"PAR1 cut")
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--verify")
    assert code == 2 and "3 damaged file(s)" in err, err
    for path in left:
        assert f"  {path} is a temporary file left by a stopped writer" in err
    code, _, err = run_cli_exit(capsys, "eval", "--out", str(run), "--no-progress", "--json")
    assert code == 0, err
    for path in left:
        assert not path.exists()
        assert f"repaired: {path.relative_to(run)} is a temporary file left by a stopped writer: removed" in err
    assert run_contents(run) == run_contents(clean_runs["serial"])
    assert run_cli_exit(capsys, "eval", "--out", str(run), "--verify")[0] == 0


@pytest.mark.parametrize("umask", [0o027, 0o002])
def test_run_files_honour_the_umask(umask: int, tmp_path: Path) -> None:
    """Every file of a run gets 0666 less the umask (a group-shared runs folder stays readable), not the
    0600 of the temporary file it was written as."""
    old = os.umask(umask)
    try:
        assert main(["eval", "--out", str(tmp_path / "run"), *SMALL_FAKE_RUN]) == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) >= 2 * 9 + 2  # parts, their checksums, manifest, metrics.json
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o666 & ~umask for p in files}


def test_a_reader_hashes_an_unchanged_part_once_and_still_refuses_a_later_flip(
    clean_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers remember a part verified unchanged (``_util.verified``) and do not hash it again; a part
    changed since, in any byte, has another stat and is hashed (and refused); ``--verify`` hashes all."""
    run, store, scores = copy(clean_runs["serial"], tmp_path)
    hashed: list[str] = []
    real = checksum.file_sha256
    monkeypatch.setattr(checksum, "file_sha256", lambda p: hashed.append(Path(p).name) or real(p))
    RunStore(run).check_readable()
    RunStore(run).check_readable()  # just written (copied): not settled, so not remembered
    assert sorted(hashed).count("prompts.parquet") == 2 and len(hashed) == 2 * (1 + 8 + 1)  # and metrics.json
    monkeypatch.setattr(verified, "SETTLED_SECONDS", 0.05)  # instead of waiting the default 2 s
    time.sleep(0.1)
    hashed.clear()
    RunStore(run).check_readable()  # hashes once more, and remembers
    assert len(hashed) == 10
    hashed.clear()
    RunStore(run).check_readable()
    assert hashed == ["metrics.json"]  # the parts and the prompts are not read again
    for part in (store.generation_part(1), scores / "part-00003.parquet"):
        original = part.read_bytes()
        for offsets in offset_classes(part).values():
            flip(part, offsets[0])
            one_error_line(*run_cli_exit(capsys, "metrics", str(run)), part, run)
            part.write_bytes(original)
    hashed.clear()
    _, problems = RunStore(run).verify()
    assert problems == [] and len(hashed) == 10  # --verify hashes every file


@pytest.mark.parametrize("damage", ["metrics", "manifest"])
def test_the_detox_comparison_reads_summaries_only_through_their_checksums(
    damage: str, clean_runs: dict[str, Path], tmp_path: Path
) -> None:
    """``detox compare`` and the paired ΔEMT read ``metrics.json`` and the manifest themselves: an edited one
    is the same one line naming the file as from every other reader, never the edited value."""
    from polytox.analysis.detox_compare import read_row
    from polytox.analysis.paired import _manifest
    from polytox.errors import DamagedRunError

    run, store, _ = copy(clean_runs["serial"], tmp_path)
    assert read_row(run).emt == pytest.approx(store.read_metrics()["overall"]["emt"])
    if damage == "metrics":
        _edit_metrics(store)
        named = store.metrics_path
    else:
        _edit_nested(store, "executor", "generate_seconds", 0.001)
        named = store.manifest_path
    with pytest.raises(DamagedRunError) as info:
        read_row(run)
    assert str(named) in str(info.value) and "repair it with: polytox eval --out" in str(info.value)
    if damage == "manifest":
        with pytest.raises(DamagedRunError, match=r"manifest\.json"):
            _manifest(run)


def test_verified_files_are_keyed_by_their_resolved_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo's key is the file's resolved path however it is reached: through a linked folder, a
    relative path, or a link to the file itself."""
    from polytox._util.verified import _key

    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    part = real / "sub" / "part-00000.parquet"
    part.write_bytes(b"x")
    (tmp_path / "linked").symlink_to(real)
    (tmp_path / "file-link").symlink_to(part)
    monkeypatch.chdir(tmp_path)
    expected = str(part.resolve())
    for path in (part, tmp_path / "linked" / "sub" / part.name, Path("linked/sub") / part.name,
                 tmp_path / "file-link", tmp_path / "linked" / "sub" / ".." / "sub" / part.name):
        assert _key(path) == expected, path
