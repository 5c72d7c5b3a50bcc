"""Maps anchored at both ends (``scale_anchored``): the monotone fit with a minimum slope, strata weights, and
the flat-step reading the card shows."""

from __future__ import annotations

import numpy as np
import pytest

from polytox.scoring.calibration import IsotonicMap
from polytox.training.scorer.scale_anchored import (
    MIN_SLOPE,
    Anchors,
    fit_anchored,
    fit_monotone,
    flat_runs,
    stratum_weights,
)

pytest.importorskip("scipy")


def test_a_straight_line_is_recovered() -> None:
    x = np.linspace(0.0, 1.0, 50)
    m = fit_monotone(x, 0.5 * x + 0.2, np.ones(50), np.quantile(x, np.linspace(0, 1, 11)))
    assert m(np.array([0.0, 0.5, 1.0])) == pytest.approx([0.2, 0.45, 0.7], abs=1e-5)


def test_no_step_is_flatter_than_the_minimum_slope() -> None:
    x = np.linspace(0.0, 1.0, 50)
    m = fit_monotone(x, np.full(50, 0.3), np.ones(50), np.quantile(x, np.linspace(0, 1, 11)))
    slopes = np.diff(m.y) / np.diff(m.x)
    assert slopes.min() == pytest.approx(MIN_SLOPE, abs=1e-4)
    assert m(np.array([0.0, 1.0])) == pytest.approx([0.25, 0.35], abs=1e-4)  # least squares: centred on 0.3


def test_the_widest_flat_run_inside_the_read_values() -> None:
    m = IsotonicMap((0.0, 0.2, 0.5, 0.6, 0.8, 1.0), (0.0, 0.3, 0.31, 0.6, 0.605, 1.0))
    assert flat_runs(m) == {"from": 0.2, "to": 0.5, "width": 0.3, "value": 0.3}
    assert flat_runs(IsotonicMap((0.0, 1.0), (0.0, 1.0)))["width"] == 0.0


def test_each_language_stratum_weighs_one() -> None:
    a = Anchors(
        np.array(["de", "de", "de", "fr"], dtype=object),
        np.zeros(4),
        np.zeros(4),
        np.array(["toxic", "toxic", "harmless", "toxic"], dtype=object),
    )
    assert stratum_weights(a).tolist() == [0.5, 0.5, 1.0, 1.0]


def test_a_translation_reads_its_source_value() -> None:
    # de reads everything 0.1 raw above its English source; the fit takes it back onto the English values
    rng = np.random.default_rng(0)
    r_e = rng.uniform(0.0, 0.8, 200)
    langs = np.array(["de"] * 200, dtype=object)
    a = Anchors(langs, r_e + 0.1, r_e, np.array(["middle"] * 200, dtype=object))
    per_lang, fallback = fit_anchored(a, IsotonicMap((0.0, 1.0), (0.0, 1.0)), ["de", "fr"])
    assert sorted(per_lang) == ["de"]
    assert per_lang["de"](np.array([0.3, 0.6])) == pytest.approx([0.2, 0.5], abs=1e-3)
    assert fallback(np.array([0.3])) == pytest.approx([0.2], abs=1e-3)


def test_scale_fit_anchored_form_keeps_english_and_takes_everyday_text_to_englishs_level() -> None:
    """``fit_scales(form="anchored")``: English maps untouched, no flat step, and everyday German that the
    head reads raw 0.25 (English: 0.02) pulled toward English's value of the same sentences (not onto it:
    the synthetic RTP-LX pairs put German's middle at the same raw output, which one monotone map cannot
    serve both ways, the failure log.md's "One scale at both ends" measured)."""
    from polytox.scoring.ml.head import MlHead, default_head_path
    from polytox.scoring.ml.scales import PERSPECTIVE_2020, PERSPECTIVE_2022
    from polytox.training.scorer.everyday import EverydayRow, everyday_pairs
    from polytox.training.scorer.scale_fit import ANCHORED, fit_scales
    from tests.test_scales import _lx_rows

    rows, raw = _lx_rows()
    head = MlHead.load(default_head_path())
    everyday = [
        EverydayRow(f"{lang} {k}", lang, f"UD_{lang}-PUD", f"s{k}", True, False, k % 2 == 0)
        for k in range(200)
        for lang in ("en", "de")
    ]
    for r in everyday:
        raw[(r.text, r.lang)] = 0.25 if r.lang == "de" else 0.02
    anchors = everyday_pairs(everyday, raw)
    plain = fit_scales(rows, raw, head, anchors=anchors)
    smooth = fit_scales(rows, raw, head, anchors=anchors, form=ANCHORED)
    unanchored = fit_scales(rows, raw, head, form=ANCHORED)
    for name in (PERSPECTIVE_2020, PERSPECTIVE_2022):
        maps = smooth.get(name).maps["full"]
        assert maps.english == plain.get(name).maps["full"].english
        assert smooth.get(name).info["cross_language"]["form"] == ANCHORED
        assert flat_runs(maps.per_lang["de"])["width"] == 0.0
        de, en = maps.apply(np.array([0.25]), ["de"])[0], maps.apply(np.array([0.02]), ["en"])[0]
        without = unanchored.get(name).maps["full"].apply(np.array([0.25]), ["de"])[0]
        assert abs(de - en) < abs(without - en) - 0.05, (name, de, without, en)
