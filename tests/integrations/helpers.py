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


# ---- the documented commands (docs/integrations.md), run as written ---------------------------------------
DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
# The user's cache folder as it was before the tests isolate theirs: the embedded models converted there once
# (make install) are linked into each run's own cache, so the commands find them without converting again.
from polytox._util.paths import default_cache_dir  # noqa: E402

MODELS = default_cache_dir() / "models"


def documented_block(name: str) -> str:
    """The bash block under ``<!-- documented-command: NAME -->`` in docs/integrations.md, verbatim."""
    import re

    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- documented-command: {re.escape(name)} -->\n```bash\n(.*?)^```$", text, re.S | re.M)
    assert found, f"docs/integrations.md has no block marked documented-command: {name}"
    return found.group(1)


def run_documented(name: str, workdir: Path, venv_name: str, timeout: int = 1500) -> tuple[Any, float]:
    """Run block ``name`` with ``bash -e`` in ``workdir``, a folder standing for a source checkout: it holds
    only ``venv_name``, a link to the virtualenv running this test (what ``make`` built). The score cache is
    the run's own; the converted embedded models are linked in. Returns the process and its wall time."""
    import subprocess
    import sys
    import time

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / venv_name).symlink_to(Path(sys.prefix), target_is_directory=True)
    cache = workdir / ".cache-polytox"
    cache.mkdir()
    if MODELS.is_dir():
        (cache / "models").symlink_to(MODELS, target_is_directory=True)
    script = workdir / "documented.sh"
    script.write_text(documented_block(name), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["POLYTOX_CACHE_DIR"] = str(cache)
    start = time.perf_counter()
    proc = subprocess.run(["bash", "-e", str(script)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return proc, time.perf_counter() - start


def polytox_cli(workdir: Path, *args: str) -> Any:
    """``polytox ARGS`` with this virtualenv's polytox, in ``workdir`` (the documented runs' score cache)."""
    import subprocess
    import sys

    env = {**os.environ, "POLYTOX_CACHE_DIR": str(workdir / ".cache-polytox")}
    return subprocess.run([sys.executable, "-m", "polytox.cli.main", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
