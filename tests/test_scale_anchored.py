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
