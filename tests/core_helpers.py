"""Helpers shared by the core tests: run the CLI (in-process or as a real subprocess), write input
files, read a run directory back as plain Python values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main

SRC = Path(__file__).resolve().parents[1] / "src"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``polytox ARGS`` in this process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_cli_exit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``run_cli``, with an argparse ``SystemExit`` read as its exit code."""
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# A small fake run of 4 shards: what the damage and repair tests break and mend.
SMALL_FAKE_RUN = ["--model", "fake", "--scorer", "fake", "--limit", "24", "--shard-size", "6", "--samples", "3",
                  "--max-new-tokens", "6", "--no-progress", "--json"]


def small_fake_runs(root: Path) -> dict[str, Path]:
    """``SMALL_FAKE_RUN`` made once under each in-process executor (serial, pipelined), uninterrupted."""
    runs = {}
    for executor in ("serial", "pipelined"):
        out = root / executor
        assert main(["eval", "--out", str(out), "--executor", executor, *SMALL_FAKE_RUN]) == 0
        runs[executor] = out
    return runs


def run_contents(run: Path) -> dict[str, object]:
    """Every Parquet file of a run as rows, and metrics.json as bytes (what an equal repair must give)."""
    found: dict[str, object] = {}
    for path in sorted(run.rglob("*")):
        rel = str(path.relative_to(run))
        if path.suffix == ".parquet":
            found[rel] = pq.read_table(path).to_pylist()
        elif path.name == "metrics.json":
            found[rel] = path.read_bytes()
    return found


def cli_env(cache_dir: Path) -> dict[str, str]:
    """Environment for a CLI subprocess that imports this worktree's polytox, offline, with its own cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["POLYTOX_CACHE_DIR"] = str(cache_dir)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "polytox.cli.main", *[str(a) for a in args]]


def run_cli_subprocess(cache_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_command(*args), env=cli_env(cache_dir), capture_output=True, text=True,
                          timeout=timeout, check=False)


def write_jsonl(path: Path, records: Iterable[Any]) -> Path:
    """One JSON value per line (``ensure_ascii``, so lone surrogates survive as ``\\udXXX`` escapes)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="ascii")
    return path


def write_lines(path: Path, lines: Sequence[bytes]) -> Path:
    """Raw bytes, one element per line (for invalid UTF-8 and malformed JSON)."""
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def read_parts(folder: Path) -> list[dict[str, Any]]:
    """Rows of every ``part-*.parquet`` in ``folder``, in part order, as dicts."""
    rows: list[dict[str, Any]] = []
    for part in sorted(folder.glob("part-*.parquet")):
        rows.extend(pq.read_table(part).to_pylist())
    return rows


def only_scores_dir(run: Path) -> Path:
    dirs = [p for p in (run / "scores").iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def eval_args(out: Path, prompts: str | Path = "demo", **flags: Any) -> list[str]:
    """``eval`` arguments for a fake-model run; ``flags`` map to ``--flag value`` (lists repeat)."""
    args = ["eval", "--out", str(out), "--prompts", str(prompts), "--no-progress"]
    merged: dict[str, Any] = {"model": "fake", "scorer": "fake", **flags}
    for key, value in merged.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, list | tuple):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


def approx_block(actual: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Assert every expected key of a metric block, floats to 1e-12."""
    for key, want in expected.items():
        got = actual[key]
        if isinstance(want, float):
            assert got == pytest.approx(want, abs=1e-12), (key, got, want)
        else:
            assert got == want, (key, got, want)


def rewrite_part(path: Path, table: Any) -> None:
    """Replace a stored Parquet part of a run by ``table``, with its checksum (``.NAME.sha256``) recorded
    anew: a test that edits a part on purpose (an older run's shape) must not look like damage."""
    from polytox._util.checksum import file_sha256, sidecar

    pq.write_table(table, path)
    sidecar(path).write_text(f"{file_sha256(path)}  {path.name}\n")

