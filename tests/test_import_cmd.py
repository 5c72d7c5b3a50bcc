"""``polytox import`` on framework outputs written here in each framework's layout (the real outputs are
imported by the framework tests in their virtualenvs: tests/integrations/). The stored run must give the
metrics the recorded values imply, keep failed scores as failures, rescore without generating, and refuse
bad input in one line."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

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


# ---- issue 62: every value checked, one line naming the file and the record, nothing left behind -------------
def inspect_sample(pid: str, epoch: int, value: object, **fields: object) -> dict[str, object]:
    """One sample of an inspect log as polytox's toxicity scorer writes it."""
    sample = {"id": pid, "epoch": epoch, "input": f"prompt {pid}", "metadata": {"lang": "en"},
              "output": {"completion": f"completion {pid}.{epoch}"},
              "scores": {"toxicity": {"value": {"emt": value}, "explanation": "SCORER_CRASHED: boom",
                                      "metadata": {"scorer": "fake@1", "scale": "fake", "threshold": 0.5}}}}
    return {**sample, **fields}


INSPECT_HEADER = {"eval": {"task": "polytox/rtp", "model": "hf/local", "model_args": {"model_path": "/m/tiny"}},
                  "plan": {"config": {"temperature": 1.0, "max_tokens": 20}},
                  "results": {"scores": [{"name": "emt", "metrics": {"mean": {"value": 0.55}}}]}}


def inspect_eval(root: Path, samples: list[dict[str, object]], raw: dict[str, str] | None = None) -> Path:
    """An inspect ``.eval`` log: a zip of header.json and one samples/<id>_epoch_<n>.json per sample."""
    import zipfile

    path = root / "log.eval"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("header.json", json.dumps(INSPECT_HEADER))
        for s in samples:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        for name, text in (raw or {}).items():
            z.writestr(name, text)
    return path


def test_an_inspect_log_becomes_a_run_with_its_recorded_values(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    samples = [inspect_sample(f"p{d}", k + 1, v if v is not None else float("nan"))
               for d, values in enumerate(VALUES) for k, v in enumerate(values)]
    code, out, err = run_cli(capsys, "import", inspect_eval(tmp_path, samples), "--out", tmp_path / "run", "--json")
    assert code == 0, err
    overall = json.loads(out)["overall"]
    assert overall["emt"] == pytest.approx(0.55) and overall["n_generations"] == 6
    assert overall["n_missing_scores"] == 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["imported"]["reported"] == {"emt": 0.55} and manifest["spec"]["generation"]["max_new_tokens"] == 20
    assert manifest["spec"]["generation"]["model"] == "tiny"


def lm_eval_line(doc: object, samples: object, **record: object) -> str:
    polytox = {"scorer": "fake@1", "scale": "fake", "threshold": 0.5, "samples": samples, **record}
    return json.dumps({"doc_id": 0, "doc": doc, "filtered_resps": [str(polytox)]})


def lm_eval_file(root: Path, *lines: str) -> Path:
    path = root / "samples_rtp_2026.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


DOC = {"id": "p0", "prompt": {"text": "prompt 0"}, "lang": "en"}
SAMPLE = {"text": "completion", "toxicity": 0.2, "error": None}
DEEP = "[" * 100_000 + "]" * 100_000
NESTED = "(" * 50_000 + ")" * 50_000


def bad_lm_eval(root: Path, case: str) -> tuple[Path, str]:
    """(source, the words its one error line must hold after ``SOURCE``) of each wrong lm-eval input."""
    cases: dict[str, tuple[list[str], str]] = {
        "deep": ([json.dumps({"doc": DOC})[:-1] + ', "x": ' + DEEP + "}"],
                 ":1: not readable JSON (nested deeper than 100 levels)"),
        "doc list": ([lm_eval_line(["p0"], [SAMPLE])], ":1: doc must be an object, got a list (['p0'])"),
        "sample string": ([lm_eval_line(DOC, ["oops"])], ":1: samples[0] must be an object, got str 'oops'"),
        "samples string": ([lm_eval_line(DOC, "oops")], ":1: samples must be a list, got str 'oops'"),
        "threshold": ([lm_eval_line(DOC, [SAMPLE], threshold="abc")], ":1: threshold must be in [0, 1], got 'abc'"),
        "list value": ([lm_eval_line(DOC, [{**SAMPLE, "toxicity": [0.5]}])],
                       ":1: field 'samples[0].toxicity' must be a number in [0, 1], got [0.5]"),
        "7.5": ([lm_eval_line(DOC, [SAMPLE, {**SAMPLE, "toxicity": 7.5}])],
                ":1: field 'samples[1].toxicity' must be in [0, 1], got 7.5"),
        "-3": ([lm_eval_line(DOC, [{**SAMPLE, "toxicity": -3}])],
               ":1: field 'samples[0].toxicity' must be in [0, 1], got -3.0"),
        "true": ([lm_eval_line(DOC, [{**SAMPLE, "toxicity": True}])],
                 ":1: field 'samples[0].toxicity' must be a number in [0, 1], got True"),
        "duplicate id": ([lm_eval_line(DOC, [SAMPLE]), lm_eval_line({**DOC, "prompt": {"text": "again"}}, [SAMPLE])],
                         ":2: document id 'p0' appears twice (first at line 1)"),
        "empty prompt": ([lm_eval_line({**DOC, "prompt": {"text": "  "}}, [SAMPLE])],
                         ":1: field 'doc.prompt.text' is empty or whitespace only"),
        "klingon": ([lm_eval_line({**DOC, "lang": "klingon"}, [SAMPLE])], ":1: unknown language code 'klingon'"),
        "prompt toxicity": ([lm_eval_line({**DOC, "prompt": {"text": "x", "toxicity": "0.5"}}, [SAMPLE])],
                            ":1: field 'doc.prompt.toxicity' must be a number in [0, 1], got '0.5'"),
        "parentheses": ([json.dumps({"doc": DOC, "filtered_resps": ["{'samples': " + NESTED + "}"]})],
                        ":1: filtered_resps holds a polytox record that is not a readable literal"),
    }
    lines, words = cases[case]
    return lm_eval_file(root, *lines), words


@pytest.mark.parametrize("case", ["deep", "doc list", "sample string", "samples string", "threshold", "list value",
                                  "7.5", "-3", "true", "duplicate id", "empty prompt", "klingon", "prompt toxicity",
                                  "parentheses"])
def test_bad_lm_eval_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    src, words = bad_lm_eval(tmp_path, case)
    code, out, err = run_cli(capsys, "import", src, "--out", tmp_path / "run")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and f"{src}{words}" in err, err
    assert not (tmp_path / "run").exists()


def bad_inspect(root: Path, case: str) -> tuple[Path, str]:
    good = inspect_sample("p0", 1, 0.2)
    member = ":samples/p0_epoch_1.json: "
    if case == "deep":
        return inspect_eval(root, [], {"samples/p0_epoch_1.json": DEEP}), member + "not readable JSON (nested deeper"
    if case == "deep json log":
        path = root / "log.json"
        path.write_text('{"eval": {}, "samples": ' + DEEP + "}")
        return path, ": not a readable inspect log: not readable JSON (nested deeper than 100 levels)"
    samples, words = {
        "epoch": ([{**good, "epoch": "one"}], "epoch must be a whole number >= 1, got 'one'"),
        "scores list": ([{**good, "scores": [0.2]}], "scores must be an object, got a list ([0.2])"),
        "sample list": ([["p0"]], "a sample must be an object, got a list (['p0'])"),
        "7.5": ([inspect_sample("p0", 1, 7.5)], "field 'scores.value.emt' must be in [0, 1], got 7.5"),
        "true": ([inspect_sample("p0", 1, True)], "field 'scores.value.emt' must be a number in [0, 1], got True"),
        "list value": ([inspect_sample("p0", 1, [0.5])],
                       "field 'scores.value.emt' must be a number in [0, 1], got [0.5]"),
        "klingon": ([{**good, "metadata": {"lang": "klingon"}}], "unknown language code 'klingon'"),
        "empty prompt": ([{**good, "input": ""}], "field 'input' is empty or whitespace only"),
        "threshold": ([{**good, "scores": {"toxicity": {"value": {"emt": 0.2}, "metadata": {"threshold": "abc"}}}}],
                      "the score's metadata.threshold must be in [0, 1], got 'abc'"),
    }[case]
    if case == "epoch":  # the member is named by the epoch the sample gives
        member = ":samples/p0_epoch_one.json: "
    if case == "sample list":  # a sample that is no object has no id to name its member by
        return inspect_eval(root, [], {"samples/x_epoch_1.json": json.dumps(samples[0])}), \
            ":samples/x_epoch_1.json: " + words
    return inspect_eval(root, samples), member + words  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["deep", "deep json log", "epoch", "scores list", "sample list", "7.5", "true",
                                  "list value", "klingon", "empty prompt", "threshold"])
def test_bad_inspect_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    src, words = bad_inspect(tmp_path, case)
    code, out, err = run_cli(capsys, "import", src, "--out", tmp_path / "run")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and f"{src}{words}" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("case", "words"), [
    ("deep", "scenario_state.json: not readable as HELM output: not readable JSON (nested deeper than 100 levels)"),
    ("instance string", "scenario_state.json: request_states[1]: instance must be an object, got str 'id1'"),
    ("states object", "scenario_state.json: request_states must be a list, got an object"),
    ("threshold", ": polytox_threshold must be in [0, 1], got 'abc'"),
    ("klingon", ": unknown language code 'klingon'"),
    ("empty prompt", "scenario_state.json: request_states[0]: field 'instance.input.text' is empty"),
    ("stats", "stats.json: stat [0]: mean must be a finite number, got 'high'"),
])
def test_bad_helm_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
                                      words: str) -> None:
    folder = helm_run(tmp_path)
    state = json.loads((folder / "scenario_state.json").read_text())
    spec = json.loads((folder / "run_spec.json").read_text())
    if case == "deep":
        (folder / "scenario_state.json").write_text('{"request_states": ' + DEEP + "}")
    elif case == "instance string":
        state["request_states"][1]["instance"] = "id1"
    elif case == "states object":
        state["request_states"] = {"0": state["request_states"][0]}
    elif case == "threshold":
        spec["metric_specs"][0]["args"]["polytox_threshold"] = "abc"
    elif case == "klingon":
        spec["metric_specs"][0]["args"]["lang"] = "klingon"
    elif case == "empty prompt":
        state["request_states"][0]["instance"]["input"]["text"] = ""
    elif case == "stats":
        (folder / "stats.json").write_text(json.dumps([{"name": {"name": "expected_max_toxicity", "split": "test"},
                                                        "count": 2, "mean": "high"}]))
    if case != "deep":
        (folder / "scenario_state.json").write_text(json.dumps(state))
    (folder / "run_spec.json").write_text(json.dumps(spec))
    code, out, err = run_cli(capsys, "import", folder, "--out", tmp_path / "run")
    assert (code, out) == (2, "") and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and f"{folder}{'/' if words[0] != ':' else ''}{words}" in err, err
    assert not (tmp_path / "run").exists()


def test_out_must_be_a_new_or_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = lm_eval_output(tmp_path)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    code, _, err = run_cli(capsys, "import", src, "--out", src)
    assert code == 2 and f"{src} is the output being imported; import into a new directory" in err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "import", src, "--out", busy)
    assert code == 2 and f"{busy} is not empty (notes.txt); import into a new or empty directory" in err
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before  # nothing mixed into the source
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "import", src, "--out", empty)
    assert code == 0, err
    assert (empty / "manifest.json").exists()


def test_a_failed_import_removes_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A failure after the run directory was opened (here: the metrics) leaves no partial run behind."""
    from polytox.errors import PolytoxError
    from polytox.integrations.importing import write

    def broken(*args: object, **kwargs: object) -> None:
        raise PolytoxError("metrics failed")

    monkeypatch.setattr(write, "run_metrics", broken)
    code, _, err = run_cli(capsys, "import", lm_eval_output(tmp_path), "--out", tmp_path / "run")
    assert code == 2 and "metrics failed" in err
    assert not (tmp_path / "run").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "import", tmp_path / "lm-eval", "--out", empty)
    assert code == 2 and list(empty.iterdir()) == []


def test_a_nan_lm_eval_printed_is_no_reported_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lm-eval prints NaN for EMT when every score of the task failed (a language the scorer lacks): nothing to
    compare, not a bad input; a string there is one."""
    src = lm_eval_output(tmp_path)
    (results,) = src.rglob("results_*.json")
    data = json.loads(results.read_text())
    data["results"]["realtoxicityprompts_polytox_k25"]["emt,polytox"] = float("nan")
    results.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "import", src, "--out", tmp_path / "run")
    assert code == 0, err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["imported"]["reported"] == {"ep": 0.5, "at": 0.3}
    data["results"]["realtoxicityprompts_polytox_k25"]["emt,polytox"] = "high"
    results.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "import", src, "--out", tmp_path / "run2")
    assert code == 2 and f"{results}: results.realtoxicityprompts_polytox_k25.emt,polytox must be a finite number, " \
        "got 'high'" in err
    assert not (tmp_path / "run2").exists()


HOSTILE = [None, "x", [0.5], {"a": 1}, True, 7.5, float("nan"), "\ud800"]


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every place in a JSON value (the root included)."""
    out = [prefix]
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in items:
        out += _paths(value, (*prefix, key))
    return out


def _with(obj: object, path: tuple[object, ...], value: object) -> object:
    if not path:
        return value
    import copy

    out = copy.deepcopy(obj)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def test_any_hostile_value_anywhere_is_a_polytox_error(tmp_path: Path) -> None:
    """Each place of each framework's output, given each hostile value in turn (a null, a string, a list, an
    object, a boolean, a number out of range, NaN, a lone surrogate): reading and checking it either works or
    raises one ``PolytoxError`` line, never another exception (the probe found AttributeError, TypeError,
    ValueError and AssertionError)."""
    from polytox.errors import PolytoxError
    from polytox.integrations.importing import read_source
    from polytox.integrations.importing.write import check_run

    tried = refused = 0

    def attempt(src: Path) -> None:
        nonlocal tried, refused
        tried += 1
        try:
            check_run(read_source(src))
        except PolytoxError as exc:
            refused += 1
            assert "\n" not in str(exc)

    src = lm_eval_output(tmp_path / "lm")
    (samples,) = src.rglob("samples_*.jsonl")
    first, second = samples.read_text().splitlines()
    row = json.loads(first)
    for path in _paths(row):
        for value in HOSTILE:
            samples.write_text(json.dumps(_with(row, path, value)) + "\n" + second + "\n")
            attempt(src)
    sample = inspect_sample("p0", 1, 0.3)
    for which, base in (("sample", sample), ("header", INSPECT_HEADER)):
        for path in _paths(base):
            for value in HOSTILE:
                log = tmp_path / "log.eval"
                with zipfile.ZipFile(log, "w") as z:
                    z.writestr("header.json", json.dumps(_with(base, path, value) if which == "header" else base))
                    z.writestr("samples/p0_epoch_1.json", json.dumps(_with(base, path, value) if which == "sample"
                                                                     else sample))
                attempt(log)
    folder = helm_run(tmp_path / "helm")
    for name in ("scenario_state.json", "run_spec.json"):
        text = (folder / name).read_text()
        for path in _paths(json.loads(text)):
            for value in HOSTILE:
                (folder / name).write_text(json.dumps(_with(json.loads(text), path, value)))
                attempt(folder)
        (folder / name).write_text(text)
    assert tried >= 800 and 0 < refused < tried
