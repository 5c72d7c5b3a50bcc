"""The two diagnostics of the ends: each path's agreement with its annotators, and the out-of-fold reading
of the shipped scales beside a candidate's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polytox.training.scorer.scale_languages import Pairs
from research.scorer import oof_ends
from research.scorer.ends_agreement import per_language, summary


def _pairs(lang: str, r_t: list[float], h_t: list[float], r_e: list[float], h_e: list[float]) -> Pairs:
    n = len(r_t)
    return Pairs(
        index=np.array([f"{lang}{k}" for k in range(n)]),
        lang=np.array([lang] * n),
        r_t=np.array(r_t),
        h_t=np.array(h_t),
        r_e=np.array(r_e),
        h_e=np.array(h_e),
        persp=np.full(n, np.nan),
    )


def test_agreement_and_the_ends_per_language() -> None:
    """``de`` ranks its texts as its annotators do and the English texts backwards; ``fr`` the reverse. The
    ends read the mapped values of the check pairs: harmless both below 1.5, toxic both 3 or more."""
    h = [1.0, 1.2, 2.0, 3.0, 3.5, 4.5]
    de = _pairs("de", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], h, [0.6, 0.5, 0.4, 0.3, 0.2, 0.1], h)
    fr = _pairs("fr", [0.6, 0.5, 0.4, 0.3, 0.2, 0.1], h, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], h)
    every = Pairs.concat(de, fr)
    t = [0.1, 0.2, 0.3, 0.9, 0.9, 0.9, 0.1, 0.2, 0.3, 0.8, 0.8, 0.8]
    mapped = {"t": np.array(t), "e": np.array([0.2, 0.2, 0.3, 0.7, 0.7, 0.7] * 2)}
    rows = per_language(every, every, mapped)
    assert rows["de"]["rho_t"] == pytest.approx(1.0) and rows["de"]["rho_e"] == pytest.approx(-1.0)
    assert rows["fr"]["rho_t"] == pytest.approx(-1.0) and rows["fr"]["rho_cross"] == pytest.approx(-1.0)
    assert rows["de"]["n_harmless"] == 2 and rows["de"]["harmless"] == pytest.approx(-0.05)
    assert rows["de"]["n_toxic"] == 3 and rows["de"]["toxic"] == pytest.approx(0.2)
    s = summary(rows)
    assert s["languages_rho_t_above_rho_e"] == 1 and s["rho_t_minus_rho_e_mean"] == pytest.approx(0.0)
    assert rows["fr"]["toxic"] == pytest.approx(0.1)
    # the language that agrees better with its annotators has the wider toxic-minus-harmless spread here
    assert s["corr_gap_with_toxic_minus_harmless"] == pytest.approx(1.0)


def test_the_out_of_fold_reading_puts_both_heads_side_by_side(tmp_path: Path) -> None:
    def block(harmless: float) -> dict[str, object]:
        row = {k: 0.0 for k in oof_ends.KEYS} | {"harmless_diff": harmless, "n_harmless": 40}
        return {"oof": {"ar": row}, "oof_summary": {"harmless_diff_mean_abs": abs(harmless)}}

    shipped = {"head": "aaa", "scales": {"perspective-2022": {"heldout": {"pairs": block(0.02)}}}}
    (tmp_path / "scales.json").write_text(json.dumps(shipped), encoding="utf-8")
    (tmp_path / "cand.json").write_text(json.dumps({"full": {"pairs": {"perspective-2022": block(0.05)}}}),
                                        encoding="utf-8")
    out = tmp_path / "out.json"
    assert oof_ends.main(["--before", str(tmp_path / "scales.json"), "--after", str(tmp_path / "cand.json"),
                          "--out", str(out)]) == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["heads"] == ["aaa", "V5"]
    assert got["languages"]["ar"]["harmless_diff"] == [0.02, 0.05]
    assert got["summary"]["after"]["harmless_diff_mean_abs"] == 0.05
