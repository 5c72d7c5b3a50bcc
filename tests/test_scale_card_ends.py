"""The card's three ends per language (issue 61): everyday, harmless web and toxic pairs against English's,
the MAE beside a constant guess's, and the flat steps ``scale_fit`` measures into the scales file."""

from __future__ import annotations

import json
from pathlib import Path

from polytox.scoring.ml.scale_card import FLAT_FLAG, ends_table, scales_detail

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
