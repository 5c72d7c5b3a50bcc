"""``polytox import`` on framework outputs written here in each framework's layout (the real outputs are
imported by the framework tests in their virtualenvs: tests/integrations/). The stored run must give the
metrics the recorded values imply, keep failed scores as failures, rescore without generating, and refuse
bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .core_helpers import run_cli

VALUES = [[0.1, 0.7, None], [0.2, 0.3, 0.4]]  # None: a failed score (its error is recorded)


def lm_eval_output(root: Path) -> Path:
    """An lm-eval ``--output_path`` folder of a polytox task: results and --log_samples, as lm-eval writes them
    (the filter's per-document dict logged as its ``str()``)."""
    folder = root / "lm-eval" / "model"
    folder.mkdir(parents=True)
    lines = []
    for d, values in enumerate(VALUES):
        samples = [
            {"text": f"completion {d}.{k}", "toxicity": v, "error": None if v is not None else "SCORER_CRASHED: boom",
             "toxic": None if v is None else v >= 0.5}
            for k, v in enumerate(values)
        ]
        record = {"scorer": "fake@1", "scale": "fake (the scorer's own probability)", "threshold": 0.5,
                  "samples": samples}
        lines.append(json.dumps({"doc_id": d, "doc": {"id": f"p{d}", "prompt": {"text": f"prompt {d}", "toxicity": 0.9},
                                                      "lang": "en"},
                                 "filtered_resps": [str(record)], "resps": [[s["text"]] for s in samples]}))
    (folder / "samples_realtoxicityprompts_polytox_k25_2026-01-01T00-00-00.jsonl").write_text("\n".join(lines) + "\n")
    results = {"results": {"realtoxicityprompts_polytox_k25": {"alias": "x", "emt,polytox": 0.55, "ep,polytox": 0.5,
                                                                "at,polytox": 0.3}},
               "config": {"model_args": "pretrained=/models/smollm2-135m-instruct"},
               "configs": {"realtoxicityprompts_polytox_k25": {"generation_kwargs": {"temperature": 1.0, "top_p": 0.9,
                                                                                       "max_gen_toks": 20}}}}
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))
    return root / "lm-eval"


def helm_run(root: Path) -> Path:
    """A HELM run folder of the plugin's run spec: prompts and completions, no per-completion values."""
    folder = root / "benchmark_output" / "runs" / "tox" / "polytox_rtp:data=demo"
    folder.mkdir(parents=True)
    states = [{"instance": {"id": f"id{d}", "input": {"text": f"prompt {d}"}, "references": [], "split": "test"},
               "result": {"success": True, "completions": [{"text": f"completion {d}.{k}"} for k in range(3)]}}
              for d in range(2)]
    (folder / "scenario_state.json").write_text(json.dumps({"adapter_spec": {"model": "huggingface/m",
                                                                             "temperature": 0.9, "max_tokens": 20},
                                                            "request_states": states}))
    spec = {"name": "polytox_rtp:data=demo", "metric_specs": [{"class_name": "x", "args": {
        "polytox_scorer": "fake@1", "polytox_scorer_opt": "", "polytox_scale": "fake", "polytox_threshold": 0.5,
        "chat_template": False}}]}
    (folder / "run_spec.json").write_text(json.dumps(spec))
    return folder


def test_lm_eval_samples_become_a_run_with_the_recorded_values(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    src = lm_eval_output(tmp_path)
    code, out, err = run_cli(capsys, "import", src, "--out", tmp_path / "run", "--json")
    assert code == 0, err
    overall = json.loads(out)["overall"]
    # prompt 0: max 0.7, toxic, mean 0.4 (the failed score left out); prompt 1: 0.4, not toxic, 0.3
    assert overall["emt"] == pytest.approx(0.55) and overall["ep"] == pytest.approx(0.5)
    assert overall["at"] == pytest.approx(0.35) and overall["n_generations"] == 6
    assert overall["n_missing_scores"] == 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["scorer"]["id"] == "fake@1"
    assert manifest["imported"]["framework"] == "lm_eval" and manifest["imported"]["reported"]["emt"] == 0.55
    assert manifest["spec"]["generation"]["samples"] == 3 and manifest["spec"]["generation"]["top_p"] == 0.9
    code, out, err = run_cli(capsys, "metrics", tmp_path / "run", "--json")
    assert code == 0 and json.loads(out)["overall"]["emt"] == overall["emt"]
    code, out, err = run_cli(capsys, "import", src, "--out", tmp_path / "run")
    assert code == 2 and "already holds a run" in err


def test_rescoring_stores_another_scorer_without_generating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polytox

    code, _out, err = run_cli(capsys, "import", lm_eval_output(tmp_path), "--out", tmp_path / "run", "--scorer", "fake",
                             "--scorer-opt", "cache=off")
    assert code == 0, err
    assert "EMT: lm_eval printed 0.55, polytox computes 0.55" in err
    run = polytox.open_run(tmp_path / "run")
    ids = {p.name for p in (tmp_path / "run" / "scores").iterdir()}
    assert len(ids) == 2
    fake_id = next(i for i in ids if i != "fake_1" and i != "fake@1")
    texts = [f"completion {d}.{k}" for d in range(2) for k in range(3)]
    expected = [r.value for r in polytox.score(texts, scorer="fake", langs="en", options={"cache": "off"})]
    rescored = run.metrics(scorer=fake_id)
    assert rescored["overall"]["emt"] == pytest.approx((max(expected[:3]) + max(expected[3:])) / 2)


def test_a_helm_run_is_scored_with_its_recorded_scorer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polytox

    code, out, err = run_cli(capsys, "import", helm_run(tmp_path), "--out", tmp_path / "run", "--json")
    assert code == 0, err
    texts = [f"completion {d}.{k}" for d in range(2) for k in range(3)]
    expected = [r.value for r in polytox.score(texts, scorer="fake", langs="en")]
    assert json.loads(out)["overall"]["emt"] == pytest.approx((max(expected[:3]) + max(expected[3:])) / 2)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["imported"]["scorer_recorded"] == "fake@1"
    assert manifest["spec"]["generation"]["chat_template"] == "never"


def test_bad_sources_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "import", tmp_path / "nothing", "--out", tmp_path / "run")
    assert code == 2 and "no such file or folder" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "samples_x_2026.jsonl"
    bad.write_text('{"doc_id": 0}\n{not json\n')
    code, _out, err = run_cli(capsys, "import", bad, "--out", tmp_path / "run")
    assert code == 2 and "samples_x_2026.jsonl:1: no polytox record" in err
    assert not (tmp_path / "run").exists()
