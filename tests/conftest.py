"""Shared fixtures: an isolated score cache per test, the shared data folder, tiny models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# A Ray call made after ray.shutdown() (a thread of Ray Data's still running) would start a new local Ray
# inside the test process; with auto-connect off it raises instead, and the test that left it fails.
os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own score cache, so no test sees another's cached scores."""
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not DATA.exists():
        pytest.skip(f"shared data folder not found at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def model_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where converted models live for the session (the embedded SmolLM2 is converted once)."""
    path = os.environ.get("POLYTOX_MODEL_CACHE")
    return Path(path) if path else tmp_path_factory.mktemp("models")
