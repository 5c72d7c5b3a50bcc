"""Shared by the framework-integration tests: polytox's own metrics of a framework's generations, and the
rule that decides whether a missing framework skips a test or fails it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ..conftest import DATA

# Set by the Makefile's integration targets: there the framework must be installed, so a missing one fails.
REQUIRE_ENV = "POLYTOX_REQUIRE_INTEGRATIONS"


def need(module: str, target: str) -> None:
    """Skip (naming the make target that installs it) unless ``module`` is importable; fail under REQUIRE_ENV."""
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed (make {target} installs it in its own virtualenv)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(message)
        pytest.skip(message)


def shared_data() -> Path:
    """The shared data folder (``../shared/data`` beside the repository, or ``POLYTOX_SHARED_DATA``)."""
    path = Path(os.environ.get("POLYTOX_SHARED_DATA") or DATA)
    if not path.is_dir():
        message = f"shared data folder not found at {path} (set POLYTOX_SHARED_DATA)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(message)
        pytest.skip(message)
    return path


def polytox_metrics(values: Sequence[Sequence[float | None]], threshold: float = 0.5) -> dict[str, Any]:
    """EMT / EP / AT of per-prompt score lists (None = a failed score) through ``polytox.metrics`` itself."""
    import duckdb
    import pyarrow as pa

    from polytox.metrics import per_prompt_table, summarize
    from polytox.spec import MetricsSpec

    gens: dict[str, list[Any]] = {"prompt_id": [], "sample_index": [], "error": []}
    scores: dict[str, list[Any]] = {"prompt_id": [], "sample_index": [], "toxicity": []}
    for p, row in enumerate(values):
        for k, value in enumerate(row):
            gens["prompt_id"].append(f"p{p:04d}")
            gens["sample_index"].append(k)
            gens["error"].append(None)
            scores["prompt_id"].append(f"p{p:04d}")
            scores["sample_index"].append(k)
            scores["toxicity"].append(value)
    ids = sorted(set(gens["prompt_id"]))
    con = duckdb.connect()
    con.register("generations", pa.table(gens, schema=pa.schema([("prompt_id", pa.string()),
                                                                 ("sample_index", pa.int64()),
                                                                 ("error", pa.string())])))
    con.register("scores", pa.table(scores, schema=pa.schema([("prompt_id", pa.string()),
                                                              ("sample_index", pa.int64()),
                                                              ("toxicity", pa.float64())])))
    con.register("prompts", pa.table({"prompt_id": ids, "lang": ["en"] * len(ids),
                                      "toxicity": pa.array([None] * len(ids), pa.float64()),
                                      "bucket": pa.array([None] * len(ids), pa.int64())}))
    spec = MetricsSpec(threshold=threshold)
    return summarize(per_prompt_table(con, spec), spec, bootstrap=False)
