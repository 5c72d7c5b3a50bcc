"""``polytox train-scorer-step``: the default scorer's pool embedding and scale steps run through the CLI, over
the training modules' library functions (the model work is replaced by stand-ins here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polytox.cli.main import main
from polytox.training.scorer import pool, scale_rows
from polytox.training.scorer.scale_rows import ERA_2020, ERA_2022, RATERS, ScaleRow

pq = pytest.importorskip("pyarrow.parquet")


def row(text: str, lang: str, target: str, heldout: bool = False) -> ScaleRow:
    return ScaleRow(text, lang, "web", target, 0.5, heldout, "g", "src")


ROWS = [
    row("a", "en", ERA_2022),  # priority 0
    row("a", "en", RATERS),  # the same text again: read once
    row("b", "de", RATERS),  # priority 1
    row("c", "en", ERA_2020, heldout=True),  # priority 2
    row("d", "en", ERA_2020),  # priority 4: left out by --max-priority 3
]


def test_scale_rows_writes_one_part_per_chunk_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_raw(texts: list[str], langs: list[str], mode: str, threads: int) -> np.ndarray:
        calls.append(list(texts))
        return np.array([float(ord(t)) for t in texts])

    monkeypatch.setattr(scale_rows, "scale_rows", lambda shared: ROWS)
    monkeypatch.setattr(scale_rows, "raw_outputs", fake_raw)
    out = tmp_path / "raw"
    argv = ["train-scorer-step", "scale-rows", "--shared", str(tmp_path), "--out", str(out), "--chunk", "2",
            "--max-priority", "3"]
    assert main(argv) == 0
    assert calls == [["a", "b"], ["c"]]
    parts = sorted(p.name for p in out.iterdir())
    assert parts == ["part-0000-full.parquet", "part-0001-full.parquet"]
    table = pq.read_table(out / parts[0]).to_pydict()
    assert table == {"text": ["a", "b"], "lang": ["en", "de"], "raw": [97.0, 98.0]}
    assert main(argv) == 0 and len(calls) == 2  # every part is there: nothing is computed again


def test_pool_embeds_the_pool_with_the_flags_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_extract(rows: list[Any], backbone: str, layers: list[int], **kw: Any) -> int:
        seen.update(rows=rows, backbone=backbone, layers=layers, **kw)
        return 3

    monkeypatch.setattr(pool, "training_pool", lambda shared, everyday=False: ["x", "y"])
    monkeypatch.setattr(pool, "tier", lambda r: 1)
    monkeypatch.setattr(pool, "extract", fake_extract)
    assert main(["train-scorer-step", "pool", "--shared", str(tmp_path), "--layers", "5,7", "--max-tier", "2"]) == 0
    assert seen == {"rows": ["x", "y"], "backbone": "gemma-3-270m", "layers": [5, 7], "max_tokens": 128,
                    "batch_size": 32, "cache_path": None, "threads": None, "max_tier": 2}


def test_the_steps_refuse_a_tier_outside_1_to_4(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["train-scorer-step", "pool", "--max-tier", "5"])
    assert stop.value.code == 2
    assert "argument --max-tier" in capsys.readouterr().err


def test_scale_fit_forms_are_the_fits_forms() -> None:
    """The parser names the map forms without importing training; they are the fit's own."""
    from polytox.cli.train_scorer_step_cmd import MAP_FORMS
    from polytox.training.scorer.scale_fit import FORMS

    assert MAP_FORMS == FORMS


def test_scale_fit_flat_only_rewrites_only_the_flat_steps(tmp_path: Path) -> None:
    """``--flat-only`` refits nothing: the written scales equal the committed ones, flat steps included."""
    import json

    from polytox.scoring.ml.scales import default_scales_path

    out = tmp_path / "scales.json"
    assert main(["train-scorer-step", "scale-fit", "--flat-only", "--out", str(out)]) == 0
    assert json.loads(out.read_text("utf-8")) == json.loads(default_scales_path().read_text("utf-8"))


def test_scale_fit_without_raw_outputs_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train-scorer-step", "scale-fit", "--shared", "/nonexistent"]) != 0
    err = capsys.readouterr().err
    assert "--raw" in err and "Traceback" not in err
