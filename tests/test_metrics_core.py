"""The metrics core keeps its numbers: outputs pinned from the version before the shared-stream bootstrap
(tests/data/metrics_core_pins.json) and the previous implementation itself (benchmarks/legacy_metrics.py)
as the oracle, to 1e-12, counts exactly."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from polytox.metrics import bootstrap_means, compute
from polytox.spec import MetricsSpec

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "tests" / "data" / "metrics_core_pins.json"


def per_prompt(n: int, seed: int, k: int = 5) -> pa.Table:
    """A seeded per-prompt table as ``per_prompt_table`` returns it: unscored prompts, six languages (one
    without a resource tier), unknown languages and prompt toxicities."""
    rng = np.random.default_rng(seed)
    n_scored = rng.integers(0, k + 1, n)
    n_scored[rng.random(n) < 0.9] = k
    mx = rng.beta(0.8, 3, n)
    mean = mx * rng.random(n)
    ptox = rng.beta(0.8, 2.5, n)
    known = rng.random(n) > 0.1
    return pa.table(
        {
            "prompt_id": [f"p{i:06d}" for i in range(n)],
            "n_generations": np.full(n, k),
            "n_failed_generations": rng.integers(0, 2, n),
            "n_scored": n_scored,
            "max_tox": pa.array(mx, mask=n_scored == 0),
            "mean_tox": pa.array(mean, mask=n_scored == 0),
            "any_toxic": pa.array(mx >= 0.5, mask=n_scored == 0),
            "lang": pa.array(rng.choice(["en", "de", "ja", "hi", "id", "sw"], n), mask=rng.random(n) < 0.02),
            "prompt_toxicity": pa.array(ptox, mask=~known),
            "toxicity_bucket": pa.array(np.minimum(3, (ptox * 4).astype(np.int8)), mask=~known),
        }
    )


def assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Equal structure; ints and None exactly, floats to 1e-12 (absolute and relative)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (where, set(ours) ^ set(theirs))
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float):
        assert isinstance(ours, float) and math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12), (
            where,
            ours,
            theirs,
        )
    else:
        assert type(ours) is type(theirs) and ours == theirs, (where, ours, theirs)


@pytest.fixture(scope="module")
def legacy() -> ModuleType:
    """benchmarks/legacy_metrics.py: the previous core, the oracle."""
    spec = importlib.util.spec_from_file_location("legacy_metrics", ROOT / "benchmarks" / "legacy_metrics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["legacy_metrics"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", sorted(json.loads(PINS.read_text())))
def test_compute_keeps_the_pinned_numbers(case: str) -> None:
    n, seed, n_boot = (int(x) for x in case.split("-"))
    pinned = json.loads(PINS.read_text())[case]
    assert_same(compute(per_prompt(n, seed), MetricsSpec(n_bootstrap=n_boot), seed=seed + 10), pinned)


@pytest.mark.parametrize(("n", "seed", "comparison"), [(5, 7, ">"), (997, 8, ">="), (20_011, 9, ">")])
def test_compute_equals_the_previous_core(n: int, seed: int, comparison: str, legacy: ModuleType) -> None:
    spec = MetricsSpec(n_bootstrap=120, comparison=comparison, ci_level=0.9)
    table = per_prompt(n, seed)
    ours = compute(table, spec, seed=seed, extra={"scorer": "x"})
    assert_same(ours, legacy.compute(table, spec, seed=seed, extra={"scorer": "x"}))
    if n > 100:  # the unknown language and the language without a tier are groups of their own
        assert (
            ours["by"]["lang"]["unknown"]["n_prompts"] > 0 and ours["by"]["resource_tier"]["unknown"]["n_prompts"] > 0
        )


@pytest.mark.parametrize("n", [1, 2, 3, 64, 4097, 100_003])
def test_bootstrap_means_equal_the_previous_core(n: int, legacy: ModuleType) -> None:
    rng = np.random.default_rng(n)
    values = rng.beta(2, 5, n)
    columns = [values, (values >= 0.3).astype(np.float64), values * rng.random(n)]
    n_boot = 40 if n > 10_000 else 333
    ours = bootstrap_means(columns, n_boot, 0.95, 5)
    assert_same(ours, legacy.bootstrap_means(columns, n_boot, 0.95, 5))
    assert ours[0][0] < ours[0][1] or n == 1


@pytest.mark.parametrize("flags", ["threshold", "strict threshold", "random", "all", "none", "tie at the cut"])
def test_flag_columns_counted_from_their_float_column_or_gathered(flags: str, legacy: ModuleType) -> None:
    """A 0/1 column that is a threshold of a float column is counted from the gathered floats; any other is
    gathered itself; both give the previous core's intervals."""
    from polytox.metrics.bootstrap import Draws

    rng = np.random.default_rng(11)
    n = 5_003
    values = np.round(rng.beta(2, 5, n), 2)  # ties: many rows share a value
    flag = {
        "threshold": values >= 0.3,
        "strict threshold": values > 0.3,
        "random": rng.random(n) < 0.3,
        "all": np.ones(n, bool),
        "none": np.zeros(n, bool),
        "tie at the cut": (values >= 0.3) & (rng.random(n) < 0.5),  # rows at 0.3 on both sides: no cut
    }[flags].astype(np.float64)
    columns = [values, flag, values * rng.random(n)]
    counted = Draws(columns, 10).sources[-1][0].dtype != np.bool_
    assert counted == (flags not in ("random", "tie at the cut"))
    assert_same(bootstrap_means(columns, 200, 0.95, 3), legacy.bootstrap_means(columns, 200, 0.95, 3))


@pytest.mark.parametrize("n", [2, 3, 100_003, 1_431_655_766, 2**31 - 1])
def test_the_stream_draws_what_numpy_draws(n: int) -> None:
    """``stream`` + ``lemire_indices`` give ``Generator.integers``'s int32 draws, words skipped and all: at
    n = 1,431,655,766 a third of the words are skipped (2**32 mod n is a third of 2**32), so every screened
    block holds some."""
    from polytox.metrics.bootstrap import _CHUNK, lemire_indices, stream

    words = stream(4)
    scratch = np.empty(_CHUNK, dtype=np.uint64)
    drawn: list[np.ndarray] = []
    for _ in range(2):  # two chunks: the stream carries on where the first ended
        indices, skipped = lemire_indices(next(words), n, scratch)
        drawn.append(np.delete(indices, skipped))
    ours = np.concatenate(drawn)
    expected = np.random.default_rng(4).integers(0, n, size=len(ours), dtype=np.int32)
    assert np.array_equal(ours, expected)
    skipped, expected_skips = 2 * _CHUNK - len(ours), 2 * _CHUNK * ((1 << 32) % n) / 2**32
    assert abs(skipped - expected_skips) <= 5 * expected_skips**0.5 + 3, (skipped, expected_skips)


def _edge_tables() -> dict[str, pa.Table]:
    t = per_prompt(50, 3)
    lang, bucket = t.schema.get_field_index("lang"), t.schema.get_field_index("toxicity_bucket")
    return {
        "empty": t.slice(0, 0),
        "no language known": t.set_column(lang, "lang", pa.nulls(50, pa.string())),
        "null-typed columns": t.set_column(lang, "lang", pa.nulls(50)).set_column(
            bucket, "toxicity_bucket", pa.nulls(50)
        ),
        "several chunks": pa.concat_tables([t.slice(0, 20), t.slice(20)]),
        "one language": t.set_column(lang, "lang", pa.array(["en"] * 50)),
        "nothing scored": t.set_column(
            t.schema.get_field_index("n_scored"), "n_scored", pa.array(np.zeros(50, np.int64))
        ),
    }


@pytest.mark.parametrize("case", sorted(_edge_tables()))
def test_edge_tables_give_what_the_previous_core_gave(case: str, legacy: ModuleType) -> None:
    table = _edge_tables()[case]
    spec = MetricsSpec(n_bootstrap=100)
    ours = compute(table, spec, 1)
    assert_same(ours, legacy.compute(table, spec, 1))
    if case == "one language":  # every prompt in one group: the overall block, computed once, each its own dict
        assert ours["by"]["lang"]["en"] == ours["by"]["resource_tier"]["high"] == ours["overall"]
        assert ours["by"]["lang"]["en"] is not ours["overall"]
    nothing = case in ("empty", "nothing scored")
    assert (ours["overall"]["n_prompts"] == 0) == nothing and (ours["overall"]["emt_ci"] is None) == nothing
