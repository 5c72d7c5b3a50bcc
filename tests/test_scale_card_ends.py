"""The card's three ends per language (issue 61): everyday, harmless web and toxic pairs against English's,
the MAE beside a constant guess's, and the flat steps ``scale_fit`` measures into the scales file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polytox.scoring.ml.head import MlHead, default_head_path
from polytox.scoring.ml.scale_card import FLAT_FLAG, ends_table, scales_detail
from polytox.scoring.ml.scales import PERSPECTIVE_2020, PERSPECTIVE_2022, load_scales
from polytox.training.scorer.scale_anchored import flat_runs

HELD = {
    "everyday": {
        "after": {
            "en": {"gap": 0.0, "n_pud": 5, "n_other": 0},
            "pl": {"gap": -0.0123, "n_pud": 5, "n_other": 0},
            "ja": {"n_pud": 0, "n_other": 0},
        }
    },
    "pairs": {
        "oof": {
            "pl": {
                "n_harmless": 20,
                "n_toxic": 10,
                "harmless_diff": 0.081,
                "harmless_share_diff": 0.12,
                "toxic_diff": -0.02,
                "mae_diff": 0.031,
                "mae_constant": 0.29,
            },
            "ja": {
                "n_harmless": 20,
                "n_toxic": 10,
                "harmless_diff": -0.004,
                "harmless_share_diff": 0.0,
                "toxic_diff": 0.06,
                "mae_diff": 0.2,
                "mae_constant": 0.3,
            },
        }
    },
    "flat": {
        "pl": {"from": 0.1, "to": 0.2, "width": 0.1, "value": 0.59},
        "ja": {"from": 0.3, "to": 0.31, "width": 0.01, "value": 0.4},
    },
}


def test_each_language_shows_its_three_ends_and_a_wide_flat_step() -> None:
    lines = ends_table("perspective-2022", HELD)
    assert "| pl | -0.012 | +0.081 (+12.0) | -0.020 | +0.031 (0.290) | raw 0.100-0.200 reads 0.59 |" in lines
    # ja: no Parallel UD rows; its widest flat step (0.01 of raw) is below the flag, so it is not named
    assert "| ja | - | -0.004 (+0.0) | +0.060 | +0.200 (0.300) | - |" in lines
    assert not any(line.startswith("| en |") for line in lines)
    assert FLAT_FLAG == 0.05


def test_a_scales_file_without_the_ends_prints_no_table() -> None:
    assert ends_table("perspective-2022", {}) == []


def test_the_detail_prints_the_ends_of_each_scale(tmp_path: Path) -> None:
    path = tmp_path / "scales.json"
    path.write_text(json.dumps({"scales": {"perspective-2020": {"heldout": HELD}}}), encoding="utf-8")
    out = scales_detail(str(path))
    assert "perspective-2020, the three ends per language against English's" in out
    assert "| pl | -0.012 | +0.081 (+12.0) |" in out


def test_the_committed_scales_carry_each_maps_flat_step(capsys: pytest.CaptureFixture[str]) -> None:
    """``scale_fit --flat-only`` measured the committed maps: every language and English, equal to what the
    maps give now, and the card names Spanish's wide step under perspective-2022 (raw 0.205-0.411 reads 0.69:
    the band of short sentences issue 61 saw lifted)."""
    from polytox.cli.main import main

    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    assert scales is not None
    for name in (PERSPECTIVE_2020, PERSPECTIVE_2022):
        maps = scales.get(name).maps["full"]
        flat = scales.get(name).info["heldout"]["flat"]
        assert set(flat) == {"en", *maps.per_lang} and len(flat) == 18  # 16 PTP languages, hi-Latn, English
        assert flat["en"] == flat_runs(maps.english)
        assert all(flat[lang] == flat_runs(m) for lang, m in maps.per_lang.items())
    es = scales.get(PERSPECTIVE_2022).info["heldout"]["flat"]["es"]
    assert es == {"from": 0.2049, "to": 0.4107, "width": 0.2058, "value": 0.6948}
    assert main(["scorers", "--scales"]) == 0
    out = capsys.readouterr().out
    assert "perspective-2022, the three ends per language against English's" in out
    assert "| es | -0.008 | +0.006 (+6.1) | +0.020 | +0.009 (0.296) | raw 0.205-0.411 reads 0.69 |" in out
