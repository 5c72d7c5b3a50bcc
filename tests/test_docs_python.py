"""Every example of docs/python.md runs, in order, in one namespace (as a reader pastes them into a notebook),
in a fresh working directory, and its assertions hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_examples_of_each_function() -> None:
    code = "\n".join(blocks())
    assert len(blocks()) >= 5
    for name in ("polytox.evaluate(", "polytox.score(", "polytox.open_run(", "polytox.PolytoxError"):
        assert name in code


def test_every_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_python"}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"{DOC.name}[block {i}]", "exec"), namespace)  # the page's own examples
    printed = capsys.readouterr().out
    assert "EMT " in printed and "samples must be in [1, 10000]" in printed
    assert (tmp_path / "runs" / "api-demo" / "metrics.json").exists()
    assert not (tmp_path / "runs" / "api-bad").exists()
