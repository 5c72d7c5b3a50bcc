"""Every user mistake gets one clear line: a table of wrong inputs for every subcommand (issue 38).

Each case runs ``polytox`` in this process (``main(argv)``: the whole sweep takes seconds) and asserts exit
code 2, exactly one ``polytox: error:`` line on stderr holding the expected words (a few more lines only
where the list of bad records is the point), no ``Traceback`` and nothing on stdout. A few cases run the
real entry point in a subprocess. Every subcommand (and sub-subcommand) of ``polytox --help`` must have a
row: a new subcommand fails ``test_every_subcommand_has_cases`` until its wrong inputs join the table.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from polytox.cli.main import build_parser, main

from .core_helpers import cli_command, cli_env


@dataclass(frozen=True)
class Case:
    """``polytox ARGV`` (``{name}`` placeholders filled from the assets) must fail with ``expect`` in its
    one error line; ``lines``: how many stderr lines are allowed (more than one only for record lists)."""

    argv: str
    expect: str
    lines: int = 1


def free_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline mode and an empty hub cache, whatever the machine has: the hub cases read the same everywhere
    (``HF_HUB_OFFLINE`` is read once, when huggingface_hub is first imported)."""
    try:
        from huggingface_hub import constants
    except ImportError:
        return
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("sweep")
    (root / "empty.jsonl").write_text("")
    (root / "bad.jsonl").write_text('{"text": "fine", "lang": "en"}\n{oops}\n')
    (root / "good.jsonl").write_text("".join(json.dumps({"id": f"g{i}", "text": f"text number {i}", "lang": "en"})
                                             + "\n" for i in range(3)))
    (root / "notamodel").mkdir()
    (root / "notamodel" / "README.txt").write_text("not a model\n")
    (root / "emptydir").mkdir()
    (root / "badyaml.yaml").write_text("samples: 2\nmodel: [fake\n")
    (root / "unknownkey.yaml").write_text("samples: 2\nsampels: 3\n")
    (root / "badvalue.yaml").write_text("model: fake\nsamples: many\n")
    (root / "list.yaml").write_text("- a\n- b\n")
    (root / "badtype.yaml").write_text("scorer: fake\nmodel: [fake, other]\n")
    (root / "badbool.yaml").write_text("model: fake\nscorer: fake\nskip_bad: maybe\n")
    (root / "scoreropt.yaml").write_text("scorer: fake\nscorer_opt:\n  colour: red\n")
    (root / "labels.csv").write_text("key,label\nexample.com,news\n")
    (root / "scored.jsonl").write_text("".join(json.dumps({"id": f"s{i}", "text": f"scored text {i}", "lang": "en",
                                                           "toxicity": i / 10}) + "\n" for i in range(10)))
    return {"tmp": str(root), "missing": str(root / "nosuch.jsonl"), "empty": str(root / "empty.jsonl"),
            "bad": str(root / "bad.jsonl"), "good": str(root / "good.jsonl"),
            "notamodel": str(root / "notamodel"), "emptydir": str(root / "emptydir"),
            "badyaml": str(root / "badyaml.yaml"), "unknownkey": str(root / "unknownkey.yaml"),
            "badvalue": str(root / "badvalue.yaml"), "listyaml": str(root / "list.yaml"),
            "badtype": str(root / "badtype.yaml"), "badbool": str(root / "badbool.yaml"),
            "scoreropt": str(root / "scoreropt.yaml"), "labels": str(root / "labels.csv"),
            "scored": str(root / "scored.jsonl"),
            "closed": f"http://127.0.0.1:{free_port()}/v1"}


EVAL = "eval --out {tmp}/run-{n} --no-progress --model fake --scorer fake --prompts {good}"
SCORE = "score --input {good} --out {tmp}/score-{n}.jsonl --no-progress"

CASES: dict[str, list[Case]] = {
    "eval": [
        # model resolution (the transformers backend; HF_HUB_OFFLINE=1 in every test)
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model gpt2",
             "offline mode is on (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1)"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model smollm2-135m",
             "did you mean 'smollm2-135m-instruct'?"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model {notamodel}",
             "is not a transformers model: it lacks config.json"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model ./no/such/folder",
             "no such folder"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model {good}",
             "is a file, not a model folder"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model 'bad id!'",
             "not a local folder, an embedded alias or a valid hub id"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model vllm:{notamodel}",
             "is not a transformers model"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model openai:m "
             "--model-opt base_url={closed}", "cannot reach base_url"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model openai:m "
             "--model-opt base_url=nowhere", "is not an http(s) URL"),
        Case("eval --out {tmp}/run-{n} --no-progress --scorer fake --prompts {good} --model openai:m",
             "needs --model-opt base_url"),
        Case(EVAL + " --model-opt tox=1", "backend 'fake' has no --model-opt 'tox'"),
        Case(EVAL + " --model-opt toxicity=lots", "toxicity takes a number"),
        Case(EVAL + " --model-opt novalue", "is not KEY=VALUE"),
        Case(EVAL + " --backend nosuch", "unknown generator 'nosuch'"),
        Case(EVAL + " --fluency-model ./no/such/lm", "no such folder"),
        Case(EVAL + " --fluency-model gpt2 --fluency-samples -1", "fluency_samples must be >= 0"),
        Case(EVAL + " --fluency-samples x", "argument --fluency-samples: invalid int value: 'x'"),
        # scorer names and options
        Case(EVAL + " --scorer nosuch", "unknown scorer 'nosuch'"),
        Case(EVAL + " --scorer fakee", "Did you mean 'fake'"),
        Case(EVAL + " --scorer-opt colour=red", "scorer 'fake' has no option 'colour'"),
        Case(EVAL + " --scorer-opt batch_size=big", "batch_size takes an integer"),
        Case("eval --out {tmp}/run-{n} --no-progress --model fake --prompts {good} --scorer-opt foo=1",
             "scorer 'default' has no option 'foo'"),
        Case("eval --out {tmp}/run-{n} --no-progress --model fake --prompts {good} --scorer-opt lm_batch_size=x",
             "lm_batch_size takes an integer or 'auto'"),
        # prompts
        Case(EVAL + " --prompts {missing}", "nosuch.jsonl"),
        Case(EVAL + " --prompts {empty}", "empty.jsonl"),
        Case(EVAL + " --prompts {emptydir}", "emptydir"),
        Case(EVAL + " --prompts {bad}", "bad.jsonl:2: malformed JSON", lines=3),
        Case(EVAL + " --lang xx-nope", "xx-nope"),
        # spec values
        Case(EVAL + " --samples many", "argument --samples/-k: invalid int value: 'many'"),
        Case(EVAL + " --samples 0", "samples"),
        Case(EVAL + " --temperature -1", "temperature"),
        Case(EVAL + " --top-p 2", "top_p"),
        Case(EVAL + " --preset gpt", "argument --preset: invalid choice"),
        Case(EVAL + " --executor warp", "argument --executor: invalid choice"),
        Case(EVAL + " --workers 0", "workers must be >= 1"),
        Case(EVAL + " --detox nosuch", "nosuch"),
        Case(EVAL + " --limit 0", "limit"),
        Case("eval --no-progress --model fake", "polytox eval needs --out DIR"),
        # config files
        Case(EVAL + " --config {tmp}/nosuch.yaml", "config file {tmp}/nosuch.yaml does not exist"),
        Case(EVAL + " --config {emptydir}", "is a folder, not a YAML file"),
        Case(EVAL + " --config {badyaml}", "badyaml.yaml:3:1: invalid YAML"),
        Case(EVAL + " --config {unknownkey}", "unknownkey.yaml:2: unknown config key 'sampels'"),
        Case(EVAL.replace(" --model fake", "") + " --config {badvalue}",
             "badvalue.yaml:2: invalid value for 'samples': expected an integer"),
        Case(EVAL + " --config {listyaml}", "must be a mapping"),
        Case("eval --out {tmp}/run-{n} --no-progress --prompts {good} --config {badtype}",
             "badtype.yaml:2: invalid value for 'model': expected a string, got ['fake', 'other']"),
        Case("eval --out {tmp}/run-{n} --no-progress --prompts {good} --config {badbool}",
             "badbool.yaml:3: invalid value for 'skip_bad': expected true or false, got 'maybe'"),
    ],
    "metrics": [
        Case("metrics {missing}", "nosuch.jsonl"),
        Case("metrics {emptydir}", "emptydir"),
        Case("metrics {empty}", "empty.jsonl"),
        Case("metrics {bad}", "bad.jsonl:2", lines=3),
        Case("metrics {good} --threshold high", "argument --threshold: invalid float value"),
    ],
    "score": [
        Case("score --input {missing} --out {tmp}/s.jsonl --no-progress", "nosuch.jsonl"),
        Case("score --input {empty} --out {tmp}/s.jsonl --no-progress --scorer fake", "empty.jsonl"),
        Case("score --input {good} --out {tmp}/s.txt --no-progress --scorer fake", "s.txt"),
        Case(SCORE + " --scorer nosuch", "unknown scorer 'nosuch'"),
        Case(SCORE + " --scorer-opt foo=1", "scorer 'default' has no option 'foo'"),
        Case(SCORE + " --scorer fake --scorer-opt fail_rate=often", "fail_rate takes a number"),
        Case(SCORE + " --scorer lexicon --scorer-opt lists=profanity --scorer-opt dir={missing}",
             "not a folder"),
        Case(SCORE + " --scorer default --scorer-opt routes=en", "is not LANG=SCORER"),
        Case(SCORE + " --scorer fake --chunk-size -1", "--chunk-size must be >= 0"),
        Case(SCORE + " --config {tmp}/nosuch.yaml", "does not exist"),
        Case(SCORE + " --config {badyaml}", "invalid YAML"),
        Case(SCORE + " --config {scoreropt}", "scorer 'fake' has no option 'colour'"),
        Case(SCORE + " --config {unknownkey}", "unknown config key 'sampels'"),
        Case(SCORE + " --layout weird", "argument --layout: invalid choice"),
    ],
    "compare-scorers": [
        Case("compare-scorers fake nosuch --input {good} --no-progress", "unknown scorer 'nosuch'"),
        Case("compare-scorers fake fake --input {missing} --no-progress", "nosuch.jsonl"),
        Case("compare-scorers fake fake --input {good} --a-opt colour=red --no-progress", "has no option 'colour'"),
        Case("compare-scorers fake @nocolumn --input {good} --no-progress", "nocolumn"),
        Case("compare-scorers fake fake --input {empty} --no-progress", "empty.jsonl"),
    ],
    "calibrate": [
        Case("calibrate fake @toxicity --input {missing} --out {tmp}/cal.json --no-progress", "nosuch.jsonl"),
        Case("calibrate nosuch @toxicity --input {good} --out {tmp}/cal.json --no-progress", "unknown scorer"),
        Case("calibrate fake @toxicity --input {scored} --out {tmp}/cal.json --holdout 2 --no-progress", "holdout"),
        Case("calibrate fake @toxicity --input {good} --out {tmp}/cal.json --no-progress",
             "reference @toxicity: no input row has a value for it"),
        Case("calibrate fake @toxicity --input {good} --out {tmp}/cal.json --a-opt x=1 --no-progress",
             "has no option 'x'"),
    ],
    "leaderboard": [
        Case("leaderboard {missing}", "nosuch.jsonl"),
        Case("leaderboard {emptydir}", "emptydir"),
        Case("leaderboard {emptydir} --meta {tmp}/nosuch.yaml", "nosuch.yaml"),
    ],
    "analyze": [
        Case("analyze language {missing} --no-plot", "nosuch.jsonl"),
        Case("analyze language {emptydir} --no-plot", "emptydir"),
        Case("analyze nonsense {emptydir}", "argument QUESTION: invalid choice"),
        Case("analyze emt-k {emptydir} --k x", "argument --k: invalid int value"),
    ],
    "report": [
        Case("report {missing} --out {tmp}/r.html", "nosuch.jsonl"),
        Case("report {emptydir} --out {tmp}/r.html", "emptydir"),
        Case("report {emptydir}", "the following arguments are required: --out"),
    ],
    "unprompted": [
        Case("unprompted {missing}", "nosuch.jsonl"),
        Case("unprompted {emptydir}", "emptydir"),
        Case("unprompted {emptydir} --n-bootstrap x", "invalid int value"),
    ],
    "build": [
        Case("build --out {tmp}/b-{n} --input {missing} --no-progress", "nosuch.jsonl"),
        Case("build --out {tmp}/b-{n} --input {empty} --scorer fake --no-progress", "the input is empty"),
        Case("build --out {tmp}/b-{n} --input {good} --scorer nosuch --no-progress", "unknown scorer 'nosuch'"),
        Case("build --out {tmp}/b-{n} --input {good} --scorer fake --scorer-opt x=1 --no-progress",
             "has no option 'x'"),
        Case("build --input {good} --no-progress", "--out"),
        Case("build --out {tmp}/b-{n} --input {good} --mode gpt", "argument --mode: invalid choice"),
    ],
    "build stats": [
        Case("build stats {missing}", "nosuch.jsonl"),
        Case("build stats {emptydir}", "emptydir"),
        Case("build stats {empty}", "empty.jsonl"),
    ],
    "train-scorer": [
        Case("train-scorer --out {tmp}/h.npz --shared {tmp}/noshared --no-progress", "noshared"),
        Case("train-scorer --out {tmp}/h.npz --folds x", "argument --folds: invalid int value"),
        Case("train-scorer --out {tmp}/h.npz --shared {emptydir} --no-progress", "emptydir"),
    ],
    "corpus": [
        Case("corpus", "the following arguments are required: STEP"),
    ],
    "corpus score": [
        Case("corpus score {missing} --out {tmp}/cs-{n}", "nosuch.jsonl"),
        Case("corpus score {empty} --out {tmp}/cs-{n} --scorer fake", "the input is empty"),
        Case("corpus score {good} --out {tmp}/cs-{n} --scorer nosuch", "unknown scorer 'nosuch'"),
        Case("corpus score {good} --out {tmp}/cs-{n} --scorer fake --scorer-opt colour=red", "has no option 'colour'"),
        Case("corpus score --out {tmp}/cs-{n}", "corpus"),
    ],
    "corpus stats": [
        Case("corpus stats {missing}", "nosuch.jsonl"),
        Case("corpus stats {emptydir}", "emptydir"),
    ],
    "corpus provenance": [
        Case("corpus provenance {emptydir} --labels {labels}", "emptydir"),
        Case("corpus provenance {emptydir} --labels {missing}", "nosuch.jsonl"),
    ],
    "corpus overlap": [
        Case("corpus overlap {missing} {good} --index {tmp}/idx --out {tmp}/ov", "nosuch.jsonl"),
        Case("corpus overlap {good} --index {tmp}/noindex --out {tmp}/ov", "noindex"),
    ],
    "serve": [
        Case("serve --open --scorer nosuch", "unknown scorer 'nosuch'"),
        Case("serve --open --scorer fake --scorer-opt colour=red", "has no option 'colour'"),
        Case("serve --port high", "argument --port: invalid int value"),
        Case("serve --scorer fake --keys-file {missing}", "nosuch.jsonl"),
        Case("serve --scorer fake --max-batch 0", "--max-batch"),
        Case("serve --open --config {badyaml}", "invalid YAML"),
    ],
    "scorers": [
        Case("scorers --card {missing}", "nosuch.jsonl"),
        Case("scorers --card {bad}", "bad.jsonl"),
    ],
    "detox": [
        Case("detox", "the following arguments are required: ACTION"),
    ],
    "detox corpus": [
        Case("detox corpus --from {missing} --exclude {good} --out {tmp}/dc-{n}", "nosuch.jsonl"),
        Case("detox corpus --from {empty} --exclude {good} --out {tmp}/dc-{n}", "corpus too small"),
        Case("detox corpus --from {good} --exclude {missing} --out {tmp}/dc-{n}", "prompt file to exclude not found"),
        Case("detox corpus --from {good} --exclude {good} --out {tmp}/dc-{n} --percentile 300", "percentile"),
    ],
    "detox train": [
        Case("detox train dapt --corpus {missing} --out {tmp}/dt", "nosuch.jsonl"),
        Case("detox train dapt --corpus {emptydir} --out {tmp}/dt --model {notamodel}", "emptydir"),
        Case("detox train magic --corpus {emptydir} --out {tmp}/dt", "invalid choice: 'magic'"),
    ],
    "detox perplexity": [
        Case("detox perplexity --model ./no/such/lm --corpus {emptydir}", "no train.jsonl"),
        Case("detox perplexity --model fake --corpus {missing}", "nosuch.jsonl"),
    ],
    "detox compare": [
        Case("detox compare {missing}", "nosuch.jsonl"),
        Case("detox compare {emptydir}", "emptydir"),
    ],
}


def command_paths(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """Every subcommand path of the parser (``eval``, ``corpus score``, ...), from its subparsers."""
    paths: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                paths.append(path)
                paths.extend(command_paths(sub, path))
    return paths


def test_every_subcommand_has_cases() -> None:
    """A new subcommand joins the table: without cases of its own this test fails."""
    paths = command_paths(build_parser())
    assert paths and "eval" in paths
    missing = sorted(set(paths) - set(CASES))
    assert not missing, f"add wrong-input cases for: {', '.join(missing)}"
    assert not sorted(set(CASES) - set(paths)), "the table names a subcommand that no longer exists"
    assert all(CASES[p] for p in paths)


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusals exit through SystemExit(2)
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def check_one_line(code: int, out: str, err: str, case: Case, expect: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "Traceback" not in out, err
    assert code == 2, (code, err)
    errors = [line for line in lines if line.startswith("polytox: error: ")]
    assert len(errors) == 1, err
    assert 1 <= len(lines) <= case.lines, err
    assert lines[0] == errors[0], err
    assert expect in err, (expect, err)
    assert out == "", out


ALL = [(path, i, case) for path, cases in CASES.items() for i, case in enumerate(cases)]


@pytest.mark.parametrize(("path", "index", "case"), ALL, ids=[f"{p}-{i}" for p, i, _ in ALL])
def test_wrong_input_gives_one_error_line(path: str, index: int, case: Case, assets: dict[str, str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    values = {**assets, "n": f"{path.replace(' ', '-')}-{index}"}
    argv = [part.format(**values) for part in shlex.split(case.argv)]
    assert " ".join(argv[: len(path.split())]) == path or path in ("corpus", "detox")
    code, out, err = run_in_process(argv, capsys)
    check_one_line(code, out, err, case, case.expect.format(**values))
    for part in argv:  # a refused run leaves no run directory behind
        if part.startswith(f"{assets['tmp']}/run-"):
            assert not Path(part).exists(), part


@pytest.mark.parametrize("argv,expect", [
    (["eval", "--out", "{tmp}/sub-1", "--model", "fake", "--scorer", "fake", "--prompts", "{bad}"],
     "bad.jsonl:2: malformed JSON"),
    (["eval", "--out", "{tmp}/sub-2", "--config", "{tmp}/nosuch.yaml"], "does not exist"),
    (["score", "--input", "{good}", "--out", "{tmp}/sub-3.jsonl", "--scorer-opt", "foo=1"], "has no option 'foo'"),
    (["eval", "--out", "{tmp}/sub-4", "--samples", "x"], "invalid int value"),
])
def test_the_real_entry_point(argv: list[str], expect: str, assets: dict[str, str], tmp_path: Path) -> None:
    """The installed entry point as a subprocess: exit 2, one line, no traceback, no progress bar."""
    args = [a.format(**assets) for a in argv]
    proc = subprocess.run(cli_command(*args), env=cli_env(tmp_path / "cache"), capture_output=True, text=True,
                          timeout=120, check=False)
    case = Case("", expect, lines=3)
    check_one_line(proc.returncode, proc.stdout, proc.stderr, case, expect)
    assert "generate+score" not in proc.stderr and "0/?" not in proc.stderr


@pytest.mark.parametrize(("argv", "expect"), [
    ([], "polytox: error: the following arguments are required: COMMAND (see 'polytox --help')"),
    (["evaluate"], "polytox: error: argument COMMAND: invalid choice: 'evaluate'"),
    (["metrics", "run", "--nosuch"], "polytox: error: unrecognized arguments: --nosuch"),
])
def test_no_or_an_unknown_subcommand(argv: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_in_process(argv, capsys)
    check_one_line(code, out, err, Case("", expect), expect)


# ---- debug: the traceback of a user error on request; a bug keeps its traceback ------------------------
def test_debug_flag_and_env_show_the_traceback(assets: dict[str, str], capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["eval", "--out", f"{assets['tmp']}/dbg", "--config", f"{assets['tmp']}/nosuch.yaml"]
    code, _, err = run_in_process(["--debug", *argv], capsys)
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("polytox: error: config")
    code, _, err = run_in_process([*argv, "--debug"], capsys)  # after the subcommand too
    assert code == 2 and "Traceback" in err
    monkeypatch.setenv("POLYTOX_DEBUG", "1")
    code, _, err = run_in_process(argv, capsys)
    assert code == 2 and "Traceback" in err and "PolytoxError" in err
    monkeypatch.setenv("POLYTOX_DEBUG", "0")
    code, _, err = run_in_process(argv, capsys)
    assert code == 2 and "Traceback" not in err


def test_an_internal_error_keeps_its_traceback(tmp_path: Path) -> None:
    """A bug (here: a scorer plugin that raises ZeroDivisionError) is not dressed up as a user mistake."""
    plugin = tmp_path / "buggy_scorer.py"
    plugin.write_text("def make(**options):\n    return 1 / 0\n")
    code = ("import sys; from polytox import registry; registry.register('scorer', 'buggy', 'buggy_scorer:make'); "
            "from polytox.cli.main import main; sys.exit(main(sys.argv[1:]))")
    env = cli_env(tmp_path / "cache")
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    good = tmp_path / "in.jsonl"
    good.write_text('{"text": "hi", "lang": "en"}\n')
    proc = subprocess.run([cli_command()[0], "-c", code, "score", "--input", str(good), "--out",
                           str(tmp_path / "o.jsonl"), "--scorer", "buggy"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "ZeroDivisionError" in proc.stderr
    assert "polytox: error:" not in proc.stderr
