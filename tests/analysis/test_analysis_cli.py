"""``polytox analyze``: tables on stdout, plots and exports on disk, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Built
from polytox.analysis import ANALYSES
from polytox.cli.main import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_analyze_one_question(built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plots, js, md = tmp_path / "plots", tmp_path / "size.json", tmp_path / "size.md"
    rc = main(
        [
            "analyze",
            "size",
            str(built.root / "rtp"),
            "--meta",
            str(built.meta_yaml),
            "--plot-dir",
            str(plots),
            "--json",
            str(js),
            "--markdown",
            str(md),
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    assert "Size contrasts within a family" in captured.out
    assert "pythia-410m" in captured.out
    assert (plots / "size.png").read_bytes()[:8] == PNG
    data = json.loads(js.read_text())
    assert [r["key"] for r in data] == ["size"]
    pairs = next(t for t in data[0]["tables"] if t["name"] == "size_pairs")
    assert len(pairs["rows"]) == 3
    assert "![" in md.read_text() and "size.png" in md.read_text()


def test_analyze_all_and_scorers(built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plots = tmp_path / "plots"
    assert (
        main(["analyze", "all", str(built.root), "--meta", str(built.meta_yaml), "--plot-dir", str(plots)])
        == 0
    )
    captured = capsys.readouterr()
    assert "'scorers' skipped" in captured.err
    assert sorted(p.stem for p in plots.iterdir()) == sorted(n for n in ANALYSES if n != "scorers")
    assert (
        main(
            [
                "analyze",
                "scorers",
                str(built.root / "rtp"),
                "--scorer",
                "svm",
                "--scorer-b",
                "fake",
                "--no-plot",
                "--json",
                "-",
                "--top",
                "2",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    a_over_b = next(t for t in data[0]["tables"] if t["name"] == "a_over_b")
    assert len(a_over_b["rows"]) == 2
    assert main(["analyze", "emt-k", str(built.root / "rtp"), "--k", "1", "--k", "3", "--no-plot"]) == 0
    assert "K=3" in capsys.readouterr().out


def test_analyze_errors_are_clear(built: Built, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "scorers", str(built.root / "rtp"), "--no-plot"]) == 2
    assert "two stored scorers" in capsys.readouterr().err
    assert main(["analyze", "size", str(built.root / "rtp"), "--lang", "xx-nope", "--no-plot"]) == 2
    assert "unknown language code" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["analyze", "nonsense", str(built.root)])
