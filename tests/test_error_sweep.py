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


LISTENING: list[socket.socket] = []  # kept open for the module: their ports are in use


def busy_port(root: Path) -> int:
    """A port something listens on for the whole sweep (``serve`` must refuse it before loading a scorer)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    LISTENING.append(s)
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
    (root / "tabs.yaml").write_text("models:\n\tgpt2: {family: gpt2}\n")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 4)
    deep = '{"id": "d", "lang": "en", "text": ' + "[" * 200_000 + "]" * 200_000 + "}"
    (root / "deep.jsonl").write_text('{"id": "a", "text": "a fine prompt", "lang": "en"}\n' + deep + "\n")
    (root / "openquote.csv").write_text('id,text,lang\na,"a quote left open,en\nb,another prompt,en\n')
    (root / "nullvalue.yaml").write_text("model: fake\nscorer: fake\nsamples:\n")
    (root / "dupkey.yaml").write_text("model: fake\nscorer: fake\nsamples: 2\nsamples: 3\n")
    (root / "lockrun" / ".polytox.lock").mkdir(parents=True)
    (root / "nboot.yaml").write_text("model: fake\nscorer: fake\nn_bootstrap: 2000000000\n")
    (root / "recursive.yaml").write_text("model: fake\nscorer: fake\nmodel_opt: &r [*r]\n")
    (root / "deep.yaml").write_text("model: fake\nmodel_opt: " + "[" * 600 + "]" * 600 + "\n")
    (root / "scored.jsonl").write_text("".join(json.dumps({"id": f"s{i}", "text": f"scored text {i}", "lang": "en",
                                                           "toxicity": i / 10}) + "\n" for i in range(10)))
    return {"tmp": str(root), "missing": str(root / "nosuch.jsonl"), "empty": str(root / "empty.jsonl"),
            "bad": str(root / "bad.jsonl"), "good": str(root / "good.jsonl"),
            "notamodel": str(root / "notamodel"), "emptydir": str(root / "emptydir"),
            "badyaml": str(root / "badyaml.yaml"), "unknownkey": str(root / "unknownkey.yaml"),
            "badvalue": str(root / "badvalue.yaml"), "listyaml": str(root / "list.yaml"),
            "badtype": str(root / "badtype.yaml"), "badbool": str(root / "badbool.yaml"),
            "scoreropt": str(root / "scoreropt.yaml"), "labels": str(root / "labels.csv"),
            "scored": str(root / "scored.jsonl"), "tabs": str(root / "tabs.yaml"), "binary": str(root / "binary.bin"),
            "closed": f"http://127.0.0.1:{free_port()}/v1", "busy": str(busy_port(root)),
            "deep": str(root / "deep.jsonl"), "openquote": str(root / "openquote.csv"),
            "nullvalue": str(root / "nullvalue.yaml"), "dupkey": str(root / "dupkey.yaml"),
            "lockrun": str(root / "lockrun"), "recursive": str(root / "recursive.yaml"),
            "nboot": str(root / "nboot.yaml"),
            "deepyaml": str(root / "deep.yaml")}


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
        Case(EVAL + " --fluency-model gpt2 --fluency-samples -1", "argument --fluency-samples: must be >= 0, got -1"),
        Case(EVAL + " --fluency-samples x", "argument --fluency-samples: invalid int value: 'x'"),
        # scorer names and options
        Case(EVAL + " --scorer nosuch", "unknown scorer 'nosuch'"),
        Case(EVAL + " --scorer fakee", "Did you mean 'fake'"),
        Case(EVAL + " --scorer-opt colour=red", "scorer 'fake' has no option 'colour'"),
        Case(EVAL + " --scorer-opt batch_size=big", "batch_size takes an integer"),
        Case("eval --out {tmp}/run-{n} --no-progress --model fake --prompts {good} --scorer-opt foo=1",
             "scorer 'default' has no option 'foo'"),
        Case("eval --out {tmp}/run-{n} --no-progress --model fake --prompts {good} --scorer-opt lm_batch_size=x",
             "lm_batch_size takes an integer >= 0 or 'auto'"),
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
        Case(EVAL + " --top-p 2", "argument --top-p: must be in (0, 1], got 2.0"),
        Case(EVAL + " --preset gpt", "argument --preset: invalid choice"),
        Case(EVAL + " --executor warp", "argument --executor: invalid choice"),
        Case(EVAL + " --workers 0", "argument --workers: must be >= 1, got 0"),
        Case(EVAL + " --detox nosuch", "nosuch"),
        Case(EVAL + " --limit 0", "limit"),
        Case("eval --no-progress --model fake", "polytox eval needs --out DIR"),
        Case(EVAL + " --retry-failed", "is not a run directory (no manifest.json), so there is nothing to retry"),
        Case("eval --out {emptydir} --verify", "is not a polytox run directory"),
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
        # the last inputs that got through (deep JSON, huge K, an open CSV quote, non-UTF-8 paths, options
        # without ranges, empty languages, YAML nulls and duplicate keys, a folder at the lock's path)
        Case(EVAL + " --prompts {deep}", "deep.jsonl:2: malformed JSON: nested deeper than 100 levels", lines=2),
        Case(EVAL + " --samples 99999999999999999999999", "argument --samples/-k: must be in [1, 10000]"),
        Case(EVAL + " --prompts {openquote}", "openquote.csv:2: malformed CSV: unexpected end of data", lines=2),
        Case("eval --out {tmp}/run-{n}-\udcff --no-progress --model fake --scorer fake --prompts {good}",
             "argument --out: '{tmp}/run-{n}-\\xff' holds a byte that is not UTF-8"),
        Case(EVAL + " --prompts {tmp}/p-\udcfe.jsonl", "argument --prompts: '{tmp}/p-\\xfe.jsonl' holds a byte"),
        Case(EVAL + " --model-opt delay=-1", "backend 'fake' --model-opt delay='-1': delay takes a number >= 0"),
        Case(EVAL + " --model-opt fail_rate=2", "fail_rate takes a number in [0, 1]"),
        Case(EVAL + " --model-opt delay=inf", "delay takes a number >= 0"),
        Case(EVAL + " --scorer-opt fail_rate=nan", "scorer 'fake' option fail_rate='nan': fail_rate takes a number"),
        Case(EVAL + " --scorer-opt delay=-0.5", "delay takes a number >= 0"),
        Case(EVAL + " --scorer-opt batch_size=-3", "batch_size takes an integer >= 0"),
        Case(EVAL + " --lang ''", "invalid value for 'lang': no language code given"),
        Case(EVAL + " --lang ,,,", "invalid value for 'lang': no language code given"),
        Case(EVAL + " --config {nullvalue}", "nullvalue.yaml:3: 'samples' has no value (null)"),
        Case(EVAL + " --config {dupkey}", "dupkey.yaml:4: duplicate key 'samples' (first at line 3)"),
        Case("eval --out {lockrun} --no-progress --model fake --scorer fake --prompts {good}",
             "its write lock {lockrun}/.polytox.lock is a folder"),
        Case(EVAL + " --n-bootstrap 99999999999999999999999",
             "argument --n-bootstrap: must be in [0, 100000], got 99999999999999999999999"),
        Case(EVAL + " --unprompted 5 --n-bootstrap 0", "an unprompted run's curve is the mean of its bootstrap "
             "resamples: n_bootstrap must be >= 1"),
        Case(EVAL + " --config {nboot}", "invalid spec: n_bootstrap must be in [0, 100000], got 2000000000"),
        # YAML read with limits (issue 62): a self-referring alias hung, 600 levels were a RecursionError
        Case(EVAL + " --config {recursive}", "recursive.yaml:3:16: invalid YAML: alias *r refers to its own anchor"),
        Case(EVAL + " --config {deepyaml}", "deep.yaml:2:111: invalid YAML: nested deeper than 100 levels"),
    ],
    "metrics": [
        Case("metrics {missing}", "nosuch.jsonl"),
        Case("metrics {emptydir}", "emptydir"),
        Case("metrics {empty}", "empty.jsonl"),
        Case("metrics {bad}", "bad.jsonl:2", lines=3),
        Case("metrics {good} --threshold high", "argument --threshold: invalid float value"),
        Case("metrics {tmp}", "is not a polytox run directory (no manifest.json)"),
        Case("metrics {tmp} --n-bootstrap 2000000000", "--n-bootstrap: must be in [0, 100000], got 2000000000"),
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
        Case(SCORE + " --scorer fake --chunk-size -1", "argument --chunk-size: must be >= 0, got -1"),
        Case(SCORE + " --config {tmp}/nosuch.yaml", "does not exist"),
        Case(SCORE + " --config {badyaml}", "invalid YAML"),
        Case(SCORE + " --config {scoreropt}", "scorer 'fake' has no option 'colour'"),
        Case(SCORE + " --config {unknownkey}", "unknown config key 'sampels'"),
        Case(SCORE + " --config {recursive}", "recursive.yaml:3:16: invalid YAML: alias *r refers to its own anchor"),
        Case(SCORE + " --config {deepyaml}", "deep.yaml:2:111: invalid YAML: nested deeper than 100 levels"),
        Case(SCORE + " --layout weird", "argument --layout: invalid choice"),
        Case("score --input {good} --out {good} --no-progress --scorer fake", "is the --input file itself"),
        Case(SCORE + " --scorer fake --scorer-opt fail_rate=2", "fail_rate takes a number in [0, 1]"),
    ],
    "compare-scorers": [
        Case("compare-scorers fake nosuch --input {good} --no-progress", "unknown scorer 'nosuch'"),
        Case("compare-scorers fake fake --input {missing} --no-progress", "nosuch.jsonl"),
        Case("compare-scorers fake fake --input {good} --a-opt colour=red --no-progress", "has no option 'colour'"),
        Case("compare-scorers fake @nocolumn --input {good} --no-progress", "nocolumn"),
        Case("compare-scorers fake fake --input {empty} --no-progress", "empty.jsonl"),
    ],
    "import": [
        Case("import {missing} --out {tmp}/imp-{n}", "nosuch.jsonl: no such file or folder"),
        Case("import {good} --out {tmp}/imp-{n}", "not a framework output polytox can import"),
        Case("import {emptydir} --out {tmp}/imp-{n}", "not a framework output polytox can import"),
        Case("import {good} --framework lm-eval --out {tmp}/imp-{n}", "good.jsonl:1: no polytox record"),
        Case("import {good} --framework inspect --out {tmp}/imp-{n}", "not a readable inspect log"),
        Case("import {emptydir} --framework helm --out {tmp}/imp-{n}", "not readable as HELM output"),
        Case("import {good} --framework nosuch --out {tmp}/imp-{n}", "invalid choice: 'nosuch'"),
        Case("import {lockrun} --out {lockrun}", "{lockrun} is the output being imported; import into a new directory"),
        Case("import {missing} --out {tmp}", "{tmp} is not empty ("),
        Case("import {missing} --out {good}", "argument --out: {good} is a file"),
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
        Case("leaderboard {emptydir} --lang ,,,", "--lang: no language code given"),
        Case("leaderboard {emptydir} --meta {tmp}/nosuch.yaml", "nosuch.yaml"),
        Case("leaderboard {emptydir} --meta {tabs}", "tabs.yaml:2:1: invalid YAML: found character '\\t'"),
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
        Case("unprompted {emptydir} --n-bootstrap 2000000000", "--n-bootstrap: must be in [1, 100000], got 2000000000"),
        Case("unprompted {emptydir} --plot {tmp}/x.txt", "--plot {tmp}/x.txt: the plot is written as .png, .svg, .pdf"),
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
    "train-scorer-step": [
        Case("train-scorer-step", "the following arguments are required: STEP"),
    ],
    "train-scorer-step pool": [
        Case("train-scorer-step pool --shared {emptydir}", "scorer-train/en-perspective.jsonl: missing"),
        Case("train-scorer-step pool --layers 5,x", "argument --layers: invalid int value: 'x' in '5,x'"),
    ],
    "train-scorer-step scale-rows": [
        Case("train-scorer-step scale-rows --shared {emptydir} --out {tmp}/raw-{n}",
             "scorer-train/en-perspective.jsonl: missing"),
        Case("train-scorer-step scale-rows --out {tmp}/raw-{n} --mode big", "argument --mode: invalid choice: 'big'"),
        Case("train-scorer-step scale-rows --shared {emptydir}", "the following arguments are required: --out"),
    ],
    "train-scorer-step scale-fit": [
        Case("train-scorer-step scale-fit --shared {emptydir} --raw {emptydir}", "no raw outputs of the head"),
        Case("train-scorer-step scale-fit --shared {emptydir}",
             "train-scorer-step scale-fit: give --raw DIR (the raw outputs to fit on), or --flat-only"),
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
        Case("corpus stats {emptydir} --n-bootstrap 100001", "--n-bootstrap: must be in [0, 100000], got 100001"),
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
        Case("serve --open --config {recursive}", "recursive.yaml:3:16: invalid YAML: alias *r refers to its own"),
        Case("serve --open --config {deepyaml}", "deep.yaml:2:111: invalid YAML: nested deeper than 100 levels"),
        Case("serve --open --scorer fake --port 70000", "argument --port: must be in [1, 65535], got 70000"),
        Case("serve --open --scorer fake --port {busy}", "cannot listen on 127.0.0.1:{busy}: Address already in use"),
        Case("serve --open --scorer fake --host no-such-host.invalid", "--host no-such-host.invalid: cannot resolve"),
    ],
    "scorers": [
        Case("scorers --card {missing}", "nosuch.jsonl"),
        Case("scorers --card {bad}", "bad.jsonl"),
        Case("scorers --card {binary}", "binary.bin: not a polytox scorer measurement file"),
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
        if part.startswith((f"{assets['tmp']}/run-", f"{assets['tmp']}/imp-")):
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
    (["metrics", "run", "--nosuch"],
     "polytox: error: polytox metrics: unrecognized arguments: --nosuch (see 'polytox metrics --help')"),
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


# ---- issue 46: every numeric flag and every output flag, checked before work -------------------------
def checked_actions() -> list[tuple[str, argparse.Action]]:
    from polytox.cli.checks import command_actions

    return [(cmd, a) for cmd, a in command_actions(build_parser()) if getattr(a.type, "checked", None)]


def numeric_cases() -> list[tuple[str, str, str, str]]:
    """(command, flag, value, expected words): for every numeric flag a value below and above its range
    (where it has bounds) and a value of the wrong type."""
    cases = []
    for cmd, action in checked_actions():
        checked = action.type.checked  # type: ignore[union-attr]
        if checked.kind != "number":
            continue
        rule, flag = checked.rule, max(action.option_strings, key=len)
        kind = action.type.__name__  # type: ignore[union-attr]
        if rule.lo is not None:
            low = rule.lo if rule.lo_open else rule.lo - 1
            cases.append((cmd, flag, str(int(low) if kind == "int" else float(low)), f"must be {rule.describe()}"))
        if rule.hi is not None:
            high = rule.hi if rule.hi_open else rule.hi + 1
            cases.append((cmd, flag, str(int(high) if kind == "int" else float(high)),
                          f"must be {rule.describe()}"))
        cases.append((cmd, flag, "x1", f"invalid {kind} value: 'x1'"))
    return cases


def output_cases() -> list[tuple[str, str, str, str]]:
    """(command, flag, place, kind) for every flag naming an output x every wrong place."""
    cases = []
    for cmd, action in checked_actions():
        checked = action.type.checked  # type: ignore[union-attr]
        if checked.kind == "output":  # the wrong kind of place: a file for a folder, a folder for a file
            wrong = "file" if checked.rule == "dir" else "folder"
            for place in (wrong, "read-only", "under-a-file"):
                cases.append((cmd, max(action.option_strings, key=len), place, checked.rule))
    return cases


def list_cases() -> list[tuple[str, str, str, str]]:
    """(command, flag, value, expected words) for every flag of a comma list of numbers (``NUMBER_LISTS``):
    an item that is not a number, an item out of range, and a list of the wrong length where the row fixes it."""
    cases = []
    for cmd, action in checked_actions():
        checked = action.type.checked  # type: ignore[union-attr]
        if checked.kind != "list":
            continue
        row, flag = checked.rule, max(action.option_strings, key=len)
        good = "1" if row.kind == "int" else "1.0"
        n = row.items or 2
        cases.append((cmd, flag, ",".join([good] * (n - 1) + ["x"]), f"invalid {row.kind} value: 'x'"))
        low = str(int(row.range.lo) - 1) if row.kind == "int" else str(float(row.range.lo) - 1)
        cases.append((cmd, flag, ",".join([good] * (n - 1) + [low]), f"must be {row.range.describe()}"))
        if row.items:
            cases.append((cmd, flag, ",".join([good] * (n + 1)), f"expected {n} {row.kind} value(s)"))
    return cases


NUMERIC = numeric_cases()
OUTPUT = output_cases()
LISTS = list_cases()


def test_every_numeric_flag_has_a_range() -> None:
    """``cli.checks.install`` raises for a numeric flag without a rule; here: each one was wrapped."""
    from polytox.cli.checks import command_actions

    for cmd, action in command_actions(build_parser()):
        if action.type in (int, float):
            raise AssertionError(f"{cmd} {action.option_strings}: unchecked numeric flag")
    assert len({(c, f) for c, f, _, _ in NUMERIC}) >= 100
    from polytox.cli.checks import NUMBER_LISTS, OUTPUTS

    # every row of the tables names a real flag (``install`` attached it)
    assert len({(c, f) for c, f, _, _ in OUTPUT}) == len(OUTPUTS) == 33
    assert len({(c, f) for c, f, _, _ in LISTS}) == len(NUMBER_LISTS) == 4
    # train-scorer-step's numbers and outputs are rows too, swept like every other command's
    assert {("train-scorer-step pool", "--max-tier"), ("train-scorer-step pool", "--batch-size"),
            ("train-scorer-step scale-rows", "--chunk")} <= {(c, f) for c, f, _, _ in NUMERIC}
    assert {("train-scorer-step scale-rows", "--out"), ("train-scorer-step scale-fit", "--out"),
            ("train-scorer-step scale-fit", "--measurements")} <= {(c, f) for c, f, _, _ in OUTPUT}


@pytest.mark.parametrize(("command", "flag", "value", "expect"), LISTS,
                         ids=[f"{c.replace(' ', '-')}{f}={v}" for c, f, v, _ in LISTS])
def test_every_number_list_flag_with_a_bad_item_or_length(command: str, flag: str, value: str, expect: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_in_process([*command.split(), f"{flag}={value}"], capsys)
    check_one_line(code, out, err, Case("", expect), f"argument {flag}")
    assert expect in err, err


@pytest.mark.parametrize(("command", "flag", "value", "expect"), NUMERIC,
                         ids=[f"{c.replace(' ', '-')}{f}={v}" for c, f, v, _ in NUMERIC])
def test_every_numeric_flag_out_of_range_or_of_the_wrong_type(command: str, flag: str, value: str, expect: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_in_process([*command.split(), f"{flag}={value}"], capsys)
    check_one_line(code, out, err, Case("", expect), f"argument {flag}")
    assert expect in err, err


@pytest.mark.parametrize(("command", "flag", "place", "kind"), OUTPUT,
                         ids=[f"{c.replace(' ', '-')}{f}-{p}" for c, f, p, _ in OUTPUT])
def test_every_output_flag_in_a_wrong_place(command: str, flag: str, place: str, kind: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A file where a folder is wanted and the reverse, a read-only place, a path under a regular file: one
    line, exit 2, before any work, nothing created. The read-only place is /sys (sysfs refuses new files even
    to root, who passes every permission check on an ordinary disk)."""
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("x\n")
    a_folder = tmp_path / "a-folder"
    a_folder.mkdir()
    wants_folder = kind == "dir"
    value, expect = {
        "file": (str(a_file), "is a file; give a folder"),
        "folder": (str(a_folder), "is a folder; give a file name"),
        "read-only": ("/sys/polytox-sweep/out" + ("" if wants_folder else ".json"), "cannot write in /sys"),
        "under-a-file": (str(a_file / "out"), f"{a_file} is a file, not a folder"),
    }[place]
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run_in_process([*command.split(), flag, value], capsys)
    check_one_line(code, out, err, Case("", expect), expect)
    assert f"argument {flag}" in err
    assert sorted(tmp_path.rglob("*")) == before and a_file.read_text() == "x\n"


# ---- a refusal leaves nothing behind: the corrected command runs -------------------------------------
REFUSED_THEN_FIXED = [
    ("build --out {out} --input {empty} --scorer fake --no-progress --json", "the input is empty",
     "build --out {out} --input {good} --scorer fake --no-progress --json", "build.json"),
    ("corpus score {empty} --out {out} --scorer fake", "the input is empty",
     "corpus score {good} --out {out} --scorer fake --json", "manifest.json"),
    ("corpus score {rtp} --out {out} --scorer fake", "--text-field prompt.text",
     "corpus score {rtp} --out {out} --scorer fake --text-field prompt.text --json", "manifest.json"),
    ("eval --out {out} --model fake --scorer fake --prompts {good} --no-progress --json --threshold 2",
     "must be in [0, 1]",
     "eval --out {out} --model fake --scorer fake --prompts {good} --no-progress --json --threshold 0.6",
     "manifest.json"),
    ("eval --out {out} --model fake --scorer fake --prompts {good} --no-progress --json FAULTS=bogus=1",
     "unknown fault 'bogus'",
     "eval --out {out} --model fake --scorer fake --prompts {good} --no-progress --json", "manifest.json"),
    ("eval --out {out} --retry-failed --model fake --scorer fake --prompts {good} --no-progress",
     "nothing to retry", "eval --out {out} --model fake --scorer fake --prompts {good} --no-progress --json",
     "manifest.json"),
]


@pytest.mark.parametrize(("refused", "expect", "fixed", "made"), REFUSED_THEN_FIXED,
                         ids=[r.split(" --")[0].replace(" ", "-") + f"-{i}" for i, (r, *_) in
                              enumerate(REFUSED_THEN_FIXED)])
def test_a_refusal_leaves_nothing_behind(refused: str, expect: str, fixed: str, made: str, assets: dict[str, str],
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    rtp = tmp_path / "rtp.jsonl"
    rtp.write_text(json.dumps({"prompt": {"text": "a prompt to score", "toxicity": 0.1},
                               "continuation": {"text": "and its end"}}) + "\n")
    values = {**assets, "out": str(tmp_path / "out"), "rtp": str(rtp)}
    argv = [p.format(**values) for p in shlex.split(refused)]
    faults = [a for a in argv if a.startswith("FAULTS=")]
    if faults:
        argv.remove(faults[0])
        monkeypatch.setenv("POLYTOX_FAKE_FAULTS", faults[0].split("=", 1)[1])
    def files() -> list[Path]:  # the score cache (POLYTOX_CACHE_DIR) is not an output
        return sorted(p for p in tmp_path.rglob("*") if "cache" not in p.relative_to(tmp_path).parts)

    before = files()
    code, out, err = run_in_process(argv, capsys)
    check_one_line(code, out, err, Case("", expect), expect)
    assert files() == before, "a refusal left something behind"
    monkeypatch.delenv("POLYTOX_FAKE_FAULTS", raising=False)
    code, out, err = run_in_process([p.format(**values) for p in shlex.split(fixed)], capsys)
    assert code == 0, err
    assert (tmp_path / "out" / made).exists()


# ---- stdout closed early: no BrokenPipe traceback, in every subcommand that prints ------------------
class ClosedPipe:
    """A stdout whose reader has gone (``polytox ... | head -1`` after its line): every write fails."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("no file descriptor")


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory, assets: dict[str, str]) -> dict[str, str]:
    """Outputs the printing commands read: a run, an unprompted run, a corpus scoring, a build."""
    root = tmp_path_factory.mktemp("pipe")
    made = {"run": str(root / "run"), "unp": str(root / "unp"), "cs": str(root / "cs"), "bld": str(root / "bld"),
            "scored40": str(root / "scored40.jsonl")}
    Path(made["scored40"]).write_text("".join(json.dumps({"id": f"s{i}", "text": f"scored text {i}", "lang": "en",
                                                          "toxicity": i / 40}) + "\n" for i in range(40)))
    assert main(["eval", "--out", made["run"], "--model", "fake", "--scorer", "fake", "--limit", "30",
                 "--no-progress", "--json"]) == 0
    assert main(["eval", "--out", made["unp"], "--model", "fake", "--scorer", "fake", "--unprompted", "12",
                 "--samples", "1", "--no-progress", "--json"]) == 0
    assert main(["corpus", "score", assets["scored"], "--out", made["cs"], "--scorer", "fake", "--json"]) == 0
    assert main(["build", "--out", made["bld"], "--input", assets["scored"], "--scorer", "fake", "--no-progress",
                 "--json"]) == 0
    return {**assets, **made, "root": str(root)}


PIPED = [
    "eval --out {run} --model fake --scorer fake --limit 30 --no-progress",
    "eval --out {run} --verify",
    "metrics {run}", "metrics {run} --json",
    "score --input {good} --out {root}/s.jsonl --scorer fake --no-progress",
    "compare-scorers fake @toxicity --input {scored} --no-progress",
    "calibrate fake @toxicity --input {scored40} --out {root}/cal.json --holdout 0.5 --no-progress",
    "leaderboard {run}", "leaderboard {run} --json -",
    "analyze language {run} --no-plot", "analyze language {run} --no-plot --json -",
    "report {run} --out {root}/r.html --no-plots",
    "unprompted {unp} --n-bootstrap 20 --json", "unprompted {unp} --n-bootstrap 20 --plot {root}/u.svg",
    "build --out {bld} --input {scored} --scorer fake --no-progress",
    "build stats {bld} --no-plots",
    "corpus score {scored} --out {cs} --scorer fake", "corpus stats {cs} --no-plots",
    "corpus provenance {cs} --labels {labels}",
    "corpus overlap {scored} {good} --index {root}/idx --out {root}/ov",
    "scorers", "scorers --json", "scorers --markdown",
    "detox compare {run}", "detox compare {run} --json -",
    "--version",
]


# these write files and talk on stderr only (argparse's --version ignores a closed stdout itself)
NOTHING_ON_STDOUT = ("score ", "report ", "corpus score ", "--version")


@pytest.mark.parametrize("command", PIPED)
def test_stdout_closed_early_is_a_quiet_stop(command: str, printed: dict[str, str], capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 141 (as a C tool killed by SIGPIPE), no traceback, no error line; a command that prints nothing
    to stdout ends as usual (0)."""
    import shlex
    import sys

    argv = [p.format(**printed) for p in shlex.split(command)]
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    try:
        code = main(argv)
    except SystemExit as exc:  # --version prints through argparse, which exits
        code = int(exc.code or 0)
    monkeypatch.undo()
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    quiet = command.startswith(NOTHING_ON_STDOUT)
    assert code == (0 if quiet else 141), (code, err)
    assert "polytox: error" not in err


def test_stdout_closed_early_in_a_real_process(tmp_path: Path) -> None:
    """``polytox scorers --json | head -1``: the reader takes one line and goes; no traceback, exit 141."""
    proc = subprocess.Popen(cli_command("scorers", "--json"), env=cli_env(tmp_path / "cache"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == "{"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err and "Exception ignored" not in err, err


def test_serve_ctrl_c_is_a_clean_stop(tmp_path: Path) -> None:
    """Ctrl-C stops a server: exit 0 and "server stopped", not "interrupted; rerun to resume"."""
    import signal
    import time

    pytest.importorskip("uvicorn")
    port = free_port()
    proc = subprocess.Popen(cli_command("serve", "--open", "--scorer", "fake", "--port", str(port),
                                        "--graceful-seconds", "1"),
                            env=cli_env(tmp_path / "cache"), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "polytox: server stopped" in err and "interrupted" not in err and "Traceback" not in err


def test_a_refused_resume_names_the_automatic_batch_size_as_automatic(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = ["eval", "--out", str(tmp_path / "run"), "--model", "fake", "--scorer", "fake", "--limit", "8",
           "--no-progress", "--json"]
    assert main([*run, "--samples", "3"]) == 0
    code, _out, err = run_in_process([*run, "--samples", "5"], capsys)
    assert code == 2 and "generation.samples: stored 3, requested 5" in err
    assert "generation.batch_size: stored 85, requested 51 (chosen automatically from samples: not set by you)" in err


def test_compare_scorers_names_an_unreadable_line(assets: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A malformed line is counted as missing and named with its file:line, not only counted."""
    code, _out, err = run_in_process(["compare-scorers", "fake", "fake", "--input", assets["bad"], "--no-progress"],
                                    capsys)
    assert code == 0 and "1 input row(s) could not be read" in err and f"{assets['bad']}:2)" in err


@pytest.mark.parametrize("argv", [
    EVAL + " --prompts {bad}",
    EVAL + " --prompts {empty}",
    EVAL + " --prompts {deep}",
    EVAL + " --prompts {openquote}",
    EVAL + " --lang xx-nope",
    EVAL + " --model-opt delay=-1",
    EVAL + " --model openai:m",
    "score --input {empty} --out {tmp}/s.jsonl --no-progress --scorer fake",
    "score --input {good} --out {good} --no-progress --scorer fake",
    "compare-scorers fake nosuch --input {good} --no-progress",
])
def test_a_refusal_writes_no_score_cache(argv: str, assets: dict[str, str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The score cache (``scores.sqlite``) opens at its first use, so a command refused after its scorer was
    built creates no cache file in an empty cache folder."""
    import shlex

    cache = tmp_path / "empty-cache"
    cache.mkdir()
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(cache))
    values = {**assets, "n": f"cache-{abs(hash(argv))}"}
    code, _, err = run_in_process([p.format(**values) for p in shlex.split(argv)], capsys)
    assert code == 2, err
    assert list(cache.iterdir()) == []


# ---- one rule, three doors: a flag, a YAML key and polytox.evaluate refuse a bad value alike -----------
# (key, value as typed, the rule's words): the rule is the setting's row of polytox.settings.TABLE
SAME_RULE = [
    ("samples", "0", "must be in [1, 10000], got 0"),
    ("top_p", "2", "must be in (0, 1], got 2.0"),
    ("temperature", "-1", "must be >= 0, got -1.0"),
    ("top_k", "-1", "must be >= 0, got -1"),
    ("max_new_tokens", "0", "must be >= 1, got 0"),
    ("batch_size", "-1", "must be >= 0, got -1"),
    ("threshold", "2", "must be in [0, 1], got 2.0"),
    ("n_bootstrap", "-1", "must be in [0, 100000], got -1"),
    ("n_bootstrap", "2000000000", "must be in [0, 100000], got 2000000000"),
    ("limit", "0", "must be >= 1, got 0"),
    ("per_bucket", "0", "must be >= 1, got 0"),
    ("unprompted", "-1", "must be >= 0, got -1"),
    ("seed", "-1", "must be in [0, 9223372036854775807], got -1"),
    ("shard_size", "0", "must be >= 1, got 0"),
    ("fluency_samples", "-1", "must be >= 0, got -1"),
]
# refused in YAML and Python with the same line (and by argparse's choices on the command line)
SAME_LINE = [
    ("chat_template", "sometimes", "invalid spec: chat_template must be auto|always|never"),
    ("comparison", "'<'", "invalid spec: comparison must be one of ('>=', '>')"),
    ("samples", "many", "invalid value for 'samples': expected an integer, got 'many'"),
    ("skip_bad", "maybe", "invalid value for 'skip_bad': expected true or false, got 'maybe'"),
    ("lang", "''", "invalid value for 'lang': no language code given"),
]


def three_doors(key: str, value: str, assets: dict[str, str], tmp_path: Path,
                capsys: pytest.CaptureFixture[str]) -> tuple[tuple[int, str, str], tuple[int, str, str], str]:
    """The refusal of ``key: value`` as a flag, as a YAML key, and as a keyword of ``polytox.evaluate``."""
    import yaml

    import polytox

    base = ["eval", "--no-progress", "--model", "fake", "--scorer", "fake", "--prompts", assets["good"]]
    flag = "--" + key.replace("_", "-")
    cli = run_in_process([*base, "--out", str(tmp_path / "cli"), f"{flag}={yaml.safe_load(value)}"], capsys)
    config = tmp_path / "bad.yaml"
    config.write_text(f"model: fake\n{key}: {value}\n")
    from_yaml = run_in_process([*base, "--out", str(tmp_path / "yaml"), "--config", str(config)], capsys)
    with pytest.raises(polytox.PolytoxError) as caught:
        polytox.evaluate(model="fake", scorer="fake", prompts=assets["good"], out=tmp_path / "api",
                         **{key: yaml.safe_load(value)})
    assert not any((tmp_path / name).exists() for name in ("cli", "yaml", "api"))  # refused before any work
    return cli, from_yaml, f"polytox: error: {caught.value}"


@pytest.mark.parametrize(("key", "value", "rule"), SAME_RULE, ids=[f"{k}={v}" for k, v, _ in SAME_RULE])
def test_a_flag_a_config_and_the_api_refuse_by_one_rule(key: str, value: str, rule: str, assets: dict[str, str],
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same bad value: argparse names the flag, the config and the API name the key; the rule's words
    (range and value) are the same, from the one row; the config and the API print the same line."""
    (code, out, err), (ycode, yout, yerr), api_line = three_doors(key, value, assets, tmp_path, capsys)
    check_one_line(code, out, err, Case("", rule), rule)
    check_one_line(ycode, yout, yerr, Case("", rule), rule)
    flags = "--samples/-k" if key == "samples" else "--" + key.replace("_", "-")
    assert err.strip() == f"polytox: error: polytox eval: argument {flags}: {rule} (see 'polytox eval --help')"
    assert yerr.strip() == api_line == f"polytox: error: invalid spec: {key} {rule}"


@pytest.mark.parametrize(("key", "value", "line"), SAME_LINE, ids=[k for k, _, _ in SAME_LINE])
def test_a_config_and_the_api_refuse_with_the_same_line(key: str, value: str, line: str, assets: dict[str, str],
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (code, out, err), (ycode, yout, yerr), api_line = three_doors(key, value, assets, tmp_path, capsys)
    check_one_line(code, out, err, Case("", "polytox: error: "), "polytox: error: ")  # the flag: refused too
    check_one_line(ycode, yout, yerr, Case("", line), line)
    assert api_line.startswith(f"polytox: error: {line}")
    yaml_line = yerr.strip()
    where = f"{tmp_path / 'bad.yaml'}:2: "
    assert yaml_line in (api_line, api_line.replace("polytox: error: ", f"polytox: error: {where}")), (yaml_line,
                                                                                                      api_line)
