"""The CLI surface (flags of issue 3 §7, progress, the final table, JSON), the registries (did-you-mean,
entry-point plugins), the fake generator as a real backend, a crashing backend recorded as errors, and
``import polytox`` staying light."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from polytox import evaluate, open_run, registry
from polytox.errors import MissingDependencyError, PolytoxError, require
from polytox.generation import build_generator
from polytox.generation.base import Generator
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec
from polytox.types import Generation, GenerationRequest, Prompt, derive_seed

from .core_helpers import cli_env, eval_args, read_json, read_parts, run_cli

ISSUE_FLAGS = ["--model", "--prompts", "--scorer", "--samples", "--max-new-tokens", "--temperature",
               "--top-p", "--seed", "--limit", "--lang", "--batch-size", "--preset", "--config", "--out",
               "--skip-bad", "--per-bucket", "--top-k", "--threshold", "--comparison", "--json"]


def test_eval_help_lists_every_flag_of_the_issue(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        run_cli(capsys, "eval", "--help")
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ISSUE_FLAGS:
        assert flag in out, flag


def test_version_and_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_cli(capsys, "--version")
    assert capsys.readouterr().out.startswith("polytox ")
    from polytox.cli.main import SUBCOMMANDS

    assert {"eval", "metrics"} <= set(SUBCOMMANDS)


def test_progress_bar_table_and_json(tmp_path: Path) -> None:
    """A real subprocess: the progress bar goes to stderr, the table (or JSON) to stdout."""
    out = tmp_path / "run"
    args = [a for a in eval_args(out, lang="en", limit=5, samples=2) if a != "--no-progress"]
    proc = subprocess.run([sys.executable, "-m", "polytox.cli.main", *args], env=cli_env(tmp_path / "c"),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "generate+score" in proc.stderr and "10/10" in proc.stderr  # the bar reached the end
    for header in ("group", "prompts", "gens", "missing", "EMT", "EP", "AT"):
        assert header in proc.stdout
    assert "overall" in proc.stdout and "toxic = score >= 0.5" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "polytox.cli.main", *args, "--json"],
                          env=cli_env(tmp_path / "c"), capture_output=True, text=True, timeout=120,
                          check=False)
    data = json.loads(proc.stdout)
    assert data == read_json(out / "metrics.json")
    assert {"overall", "by", "settings", "model", "backend", "scorer"} <= set(data)


# ---- registries -------------------------------------------------------------------------------------
def test_unknown_names_suggest_close_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PolytoxError, match=r"unknown generator 'fak'\. Did you mean 'fake'\?"):
        registry.resolve("generator", "fak")
    code, _, err = run_cli(capsys, *eval_args(tmp_path / "run", scorer="svn"))
    assert code == 2 and "unknown scorer 'svn'. Did you mean 'svm'?" in err and "Known:" in err
    assert "fake" in registry.names("generator") and "transformers" in registry.names("generator")


def test_entry_point_plugins_are_discovered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A scorer shipped by another distribution registers through the ``polytox.scorers`` group."""
    site = tmp_path / "site"
    (site / "loud_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "loud_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: loud-plugin\n"
                                                                 "Version: 0.1\n")
    (site / "loud_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[polytox.scorers]\nloud = loud_plugin:LoudScorer\n")
    (site / "loud_plugin.py").write_text(
        "from polytox.scoring.base import Scorer\nfrom polytox.types import Score\n\n"
        "class LoudScorer(Scorer):\n    name = 'loud'\n    version = '7'\n\n"
        "    def score_batch(self, texts, langs):\n"
        "        return [Score(values={'toxicity': 0.9}) for _ in texts]\n")
    monkeypatch.syspath_prepend(str(site))
    assert "loud" in registry.names("scorer")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, *eval_args(out, scorer="loud", lang="en", limit=3, samples=2))
    assert code == 0, err
    metrics = read_json(out / "metrics.json")
    assert metrics["scorer"] == "loud@7"
    assert metrics["overall"]["emt"] == pytest.approx(0.9)


# ---- generators -------------------------------------------------------------------------------------
def test_fake_generator_is_deterministic_per_request() -> None:
    gen = build_generator(GenerationSpec(model="fake", backend="fake", max_new_tokens=12))
    prompt = Prompt(id="p1", text="You stupid", lang="en")
    other = Prompt(id="p2", text="Hello", lang="en")
    reqs = [GenerationRequest(prompt, k, derive_seed(0, prompt.id, k)) for k in range(4)]
    alone = gen.generate(reqs)
    mixed = gen.generate([GenerationRequest(other, 0, derive_seed(0, "p2", 0)), *reqs[::-1]])
    assert alone == mixed[1:][::-1]  # a sample does not depend on its batch or its neighbours
    assert all(g.n_tokens <= 12 and g.finish_reason in ("stop", "length") for g in alone)
    assert all(not (g.text or "").startswith("You stupid") for g in alone)  # only the continuation
    assert len({g.text for g in alone}) > 1
    assert derive_seed(0, "p1", 0) != derive_seed(1, "p1", 0) != derive_seed(0, "p1", 1)


class CrashingGenerator(Generator):
    name = "crashing"

    def __init__(self, spec: GenerationSpec) -> None:
        self.spec = spec

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if any("boom" in r.prompt.text for r in requests):
            raise RuntimeError("CUDA out of memory (simulated)")
        return [Generation(prompt_id=r.prompt.id, sample_index=r.sample_index, text=" fine words",
                           finish_reason="length", n_tokens=2) for r in requests]


def test_a_crashing_backend_loses_its_shard_as_recorded_errors(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.GENERATORS, "crashing", CrashingGenerator)  # type: ignore[arg-type]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "text": "boom" if i == 3 else f"text {i}",
                                        "lang": "en"}) + "\n" for i in range(6)))
    spec = EvalSpec(prompts=PromptSpec(source=str(path)), scorer=ScorerSpec(name="fake"), shard_size=2,
                    generation=GenerationSpec(model="x", backend="crashing", samples=3, batch_size=2))
    result = evaluate(spec, tmp_path / "run")
    rows = read_parts(tmp_path / "run" / "generations")
    failed = [r for r in rows if r["error"]]
    assert {r["prompt_id"] for r in failed} == {"p2", "p3"}  # the shard holding "boom"
    assert all(r["error"] == "GENERATION_CRASHED: RuntimeError: CUDA out of memory (simulated)"
               for r in failed)
    o = result.metrics["overall"]
    assert (o["n_failed_generations"], o["n_missing_scores"], o["n_prompts"], o["n_prompts_unscored"]) == (
        6, 6, 4, 2)
    assert open_run(tmp_path / "run").manifest["status"] == "complete"  # the read-only handle


# ---- light imports and optional dependencies ------------------------------------------------------------
def test_import_polytox_stays_light(tmp_path: Path) -> None:
    code = ("import sys, polytox, polytox.cli.main; "
            "print(sorted(m for m in ('torch', 'transformers', 'duckdb', 'pyarrow', 'sklearn', 'datasets') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(tmp_path), capture_output=True, text=True,
                          check=True, timeout=60)
    assert proc.stdout.strip() == "[]"


def test_missing_optional_dependency_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install 'polytox\[hf\]'"):
        require("surely_not_installed_module_xyz", "hf")
