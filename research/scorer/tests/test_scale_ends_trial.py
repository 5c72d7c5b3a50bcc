"""The rule's counting in ``scale_ends_trial``: which cells miss, their excess, and the choice."""

from __future__ import annotations

from typing import Any

import pytest

from research.scorer.scale_ends_trial import decide, misses


def block(harmless: float, pud: float, kappa: float = 0.4) -> dict[str, Any]:
    pairs = {
        "pl": {"harmless_diff": harmless, "harmless_share_diff": 0.0, "toxic_diff": 0.01, "mae_diff": 0.06},
        "en": {"harmless_diff": 0.5},  # English is never a cell
    }
    everyday = {"pl": {"gap": pud, "other_share_gap": 0.02}, "ja": {"other_share_gap": 0.05}}
    return {"pairs": pairs, "everyday": everyday, "summary": {"kappa_mean": kappa}}


def test_cells_that_miss_and_their_excess() -> None:
    m = misses(block(harmless=-0.05, pud=0.01))
    # pl: harmless |-0.05| > 0.03 and MAE +0.06 > 0.05; treebank +0.02 is at its limit (met); ja treebank +0.05
    assert m["cells"] == ["ja: treebank share +0.050", "pl: harmless mean -0.050", "pl: MAE +0.060"]
    assert m["n"] == 3 and m["excess"] == pytest.approx(0.03 + 0.02 + 0.01)


def test_a_candidate_must_win_by_the_margin_and_pass_the_gates() -> None:
    def result(c1: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"english_equal": {"C1": True, "C2": True}}
        for name, b in (("C0", block(-0.05, 0.01)), ("C1", c1), ("C2", block(-0.05, 0.01))):
            b["misses"] = misses(b)
            out[name] = {"perspective-2022": b}
        return out

    # C1 fixes the harmless cell (3 -> 2 misses): it wins the tie on excess, but 1 cell is short of the margin of 4
    tie = decide(result(block(0.0, 0.01)))
    assert tie["winner"] == "C1" and tie["ships"] is False
    assert tie["gates"]["C1"] == dict.fromkeys(("english_maps_equal", "pud", "kappa", "mae"), True)
    # a candidate breaking the Parallel UD gate is out, whatever its misses
    out = decide(result(block(0.0, 0.05)))
    assert out["gates"]["C1"]["pud"] is False and out["winner"] == "C0"
