# ruff: noqa: E501  (pinned lines are kept whole, as users read them)
"""Pinned refusals and a pinned fake run: the schema's refactors keep every line users read and every hash.

The expected values were captured from the code before the settings and options became one schema class
(``polytox._util.schema.Field``): each bad value given as a flag of ``polytox eval``, as a key of its YAML
config and as a keyword of ``polytox.evaluate`` must still be refused with the same line, and a fake-model
run must keep its spec hash, its scorer id and its printed metrics.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

import polytox
from polytox.cli.main import main

BASE = {"model": "fake", "scorer": "fake"}
LISTS = ("scorer_opt", "model_opt")  # repeatable flags: a YAML list

# (key, value, flag's line, YAML's line, keyword's exception) as they read before the schema class
PINNED = [
    (
        "samples",
        "0",
        "polytox: error: polytox eval: argument --samples/-k: must be in [1, 10000], got 0 (see 'polytox eval --help')",
        "polytox: error: invalid spec: samples must be in [1, 10000], got 0",
        "PolytoxError: invalid spec: samples must be in [1, 10000], got 0",
    ),
    (
        "samples",
        "many",
        "polytox: error: polytox eval: argument --samples/-k: invalid int value: 'many' (see 'polytox eval --help')",
        "polytox: error: CONFIG:2: invalid value for 'samples': expected an integer, got 'many'",
        "BadValueError: invalid value for 'samples': expected an integer, got 'many'",
    ),
    (
        "top_p",
        "2",
        "polytox: error: polytox eval: argument --top-p: must be in (0, 1], got 2.0 (see 'polytox eval --help')",
        "polytox: error: invalid spec: top_p must be in (0, 1], got 2.0",
        "PolytoxError: invalid spec: top_p must be in (0, 1], got 2.0",
    ),
    (
        "top_p",
        "high",
        "polytox: error: polytox eval: argument --top-p: invalid float value: 'high' (see 'polytox eval --help')",
        "polytox: error: CONFIG:3: invalid value for 'top_p': expected a number, got 'high'",
        "BadValueError: invalid value for 'top_p': expected a number, got 'high'",
    ),
    (
        "temperature",
        "-1",
        "polytox: error: polytox eval: argument --temperature: must be >= 0, got -1.0 (see 'polytox eval --help')",
        "polytox: error: invalid spec: temperature must be >= 0, got -1.0",
        "PolytoxError: invalid spec: temperature must be >= 0, got -1.0",
    ),
    (
        "chat_template",
        "sometimes",
        "polytox: error: polytox eval: argument --chat-template: invalid choice: 'sometimes' (choose from 'auto', 'always', 'never') (see 'polytox eval --help')",
        "polytox: error: invalid spec: chat_template must be auto|always|never",
        "PolytoxError: invalid spec: chat_template must be auto|always|never",
    ),
    (
        "format",
        "xml",
        "polytox: error: polytox eval: argument --format: invalid choice: 'xml' (choose from 'auto', 'rtp', 'ptp', 'rtplx', 'generic', 'demo') (see 'polytox eval --help')",
        "polytox: error: invalid spec: format must be one of auto, rtp, ptp, rtplx, generic, demo, got 'xml'",
        "PolytoxError: invalid spec: format must be one of auto, rtp, ptp, rtplx, generic, demo, got 'xml'",
    ),
    (
        "threshold",
        "2",
        "polytox: error: polytox eval: argument --threshold: must be in [0, 1], got 2.0 (see 'polytox eval --help')",
        "polytox: error: invalid spec: threshold must be in [0, 1], got 2.0",
        "PolytoxError: invalid spec: threshold must be in [0, 1], got 2.0",
    ),
    (
        "comparison",
        "=",
        "polytox: error: polytox eval: argument --comparison: invalid choice: '=' (choose from '>=', '>') (see 'polytox eval --help')",
        "polytox: error: invalid spec: comparison must be one of ('>=', '>')",
        "PolytoxError: invalid spec: comparison must be one of ('>=', '>')",
    ),
    (
        "n_bootstrap",
        "-1",
        "polytox: error: polytox eval: argument --n-bootstrap: must be in [0, 100000], got -1 (see 'polytox eval --help')",
        "polytox: error: invalid spec: n_bootstrap must be in [0, 100000], got -1",
        "PolytoxError: invalid spec: n_bootstrap must be in [0, 100000], got -1",
    ),
    (
        "seed",
        "-1",
        "polytox: error: polytox eval: argument --seed: must be in [0, 9223372036854775807], got -1 (see 'polytox eval --help')",
        "polytox: error: invalid spec: seed must be in [0, 9223372036854775807], got -1",
        "PolytoxError: invalid spec: seed must be in [0, 9223372036854775807], got -1",
    ),
    (
        "limit",
        "0",
        "polytox: error: polytox eval: argument --limit: must be >= 1, got 0 (see 'polytox eval --help')",
        "polytox: error: invalid spec: limit must be >= 1, got 0",
        "PolytoxError: invalid spec: limit must be >= 1, got 0",
    ),
    (
        "preset",
        "gpt",
        "polytox: error: polytox eval: argument --preset: invalid choice: 'gpt' (choose from 'rtp', 'ptp') (see 'polytox eval --help')",
        "polytox: error: CONFIG:2: unknown preset 'gpt'; known: rtp, ptp",
        "BadValueError: unknown preset 'gpt'; known: rtp, ptp",
    ),
    (
        "executor",
        "foo",
        "polytox: error: polytox eval: argument --executor: invalid choice: 'foo' (choose from 'pipelined', 'serial', 'ray') (see 'polytox eval --help')",
        "polytox: error: unknown executor 'foo'; known: pipelined, serial, ray",
        "PolytoxError: unknown executor 'foo'; known: pipelined, serial, ray",
    ),
    (
        "workers",
        "0",
        "polytox: error: polytox eval: argument --workers: must be >= 1, got 0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: workers must be >= 1",
        "PolytoxError: invalid executor settings: workers must be >= 1",
    ),
    (
        "queue_depth",
        "0",
        "polytox: error: polytox eval: argument --queue-depth: must be >= 1, got 0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: queue_depth must be >= 1",
        "PolytoxError: invalid executor settings: queue_depth must be >= 1",
    ),
    (
        "cpus_per_worker",
        "0",
        "polytox: error: polytox eval: argument --cpus-per-worker: must be > 0, got 0.0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: cpus_per_worker must be > 0",
        "PolytoxError: invalid executor settings: cpus_per_worker must be > 0",
    ),
    (
        "gpus_per_worker",
        "-1",
        "polytox: error: polytox eval: argument --gpus-per-worker: must be >= 0, got -1.0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: GPUs per worker must be >= 0",
        "PolytoxError: invalid executor settings: GPUs per worker must be >= 0",
    ),
    (
        "score_workers",
        "0",
        "polytox: error: polytox eval: argument --score-workers: must be >= 1, got 0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: workers must be >= 1",
        "PolytoxError: invalid executor settings: workers must be >= 1",
    ),
    (
        "score_gpus_per_worker",
        "-1",
        "polytox: error: polytox eval: argument --score-gpus-per-worker: must be >= 0, got -1.0 (see 'polytox eval --help')",
        "polytox: error: invalid executor settings: GPUs per worker must be >= 0",
        "PolytoxError: invalid executor settings: GPUs per worker must be >= 0",
    ),
    (
        "scorer_opt",
        "nosuch=1",
        "polytox: error: scorer 'fake' has no option 'nosuch'; its options: attr_langs, attributes, batch_size, cache, calibration, crash_on, delay, fail_rate, languages, version",
        "polytox: error: scorer 'fake' has no option 'nosuch'; its options: attr_langs, attributes, batch_size, cache, calibration, crash_on, delay, fail_rate, languages, version",
        "PolytoxError: scorer 'fake' has no option 'nosuch'; its options: attr_langs, attributes, batch_size, cache, calibration, crash_on, delay, fail_rate, languages, version",
    ),
    (
        "model_opt",
        "toxicity=2",
        "polytox: error: backend 'fake' --model-opt toxicity='2': toxicity takes a number in [0, 1]",
        "polytox: error: backend 'fake' --model-opt toxicity='2': toxicity takes a number in [0, 1]",
        "BadValueError: backend 'fake' --model-opt toxicity='2': toxicity takes a number in [0, 1]",
    ),
    (
        "model_opt",
        "nosuch=1",
        "polytox: error: backend 'fake' has no --model-opt 'nosuch'; its options: delay, echo, eos_rate, fail_rate, toxicity",
        "polytox: error: backend 'fake' has no --model-opt 'nosuch'; its options: delay, echo, eos_rate, fail_rate, toxicity",
        "PolytoxError: backend 'fake' has no --model-opt 'nosuch'; its options: delay, echo, eos_rate, fail_rate, toxicity",
    ),
    (
        "detox",
        "nosuch",
        "polytox: error: unknown --detox method 'nosuch'; known: word-filter, vocab-shift, dexperts, atcon, pplm",
        "polytox: error: unknown --detox method 'nosuch'; known: word-filter, vocab-shift, dexperts, atcon, pplm",
        "PolytoxError: unknown --detox method 'nosuch'; known: word-filter, vocab-shift, dexperts, atcon, pplm",
    ),
    (
        "detox",
        "word-filter:end=middle",
        "polytox: error: --detox word-filter option end='middle': end takes one of 'eager', 'exact'",
        "polytox: error: --detox word-filter option end='middle': end takes one of 'eager', 'exact'",
        "BadValueError: --detox word-filter option end='middle': end takes one of 'eager', 'exact'",
    ),
    (
        "detox",
        "pplm:step_size=-1",
        "polytox: error: --detox pplm option step_size='-1': step_size takes a number >= 0",
        "polytox: error: --detox pplm option step_size='-1': step_size takes a number >= 0",
        "BadValueError: --detox pplm option step_size='-1': step_size takes a number >= 0",
    ),
    (
        "detox",
        "vocab-shift",
        "polytox: error: invalid spec: --detox runs on the transformers backend (vllm: word-filter only), not 'fake'",
        "polytox: error: invalid spec: --detox runs on the transformers backend (vllm: word-filter only), not 'fake'",
        "PolytoxError: invalid spec: --detox runs on the transformers backend (vllm: word-filter only), not 'fake'",
    ),
    (
        "detox",
        "word-filter:nosuch=1",
        "polytox: error: --detox word-filter: unknown option 'nosuch'; known: list, end",
        "polytox: error: --detox word-filter: unknown option 'nosuch'; known: list, end",
        "PolytoxError: --detox word-filter: unknown option 'nosuch'; known: list, end",
    ),
    (
        "scorer_opt",
        "fail_rate=2",
        "polytox: error: scorer 'fake' option fail_rate='2': fail_rate takes a number in [0, 1]",
        "polytox: error: scorer 'fake' option fail_rate='2': fail_rate takes a number in [0, 1]",
        "BadValueError: scorer 'fake' option fail_rate='2': fail_rate takes a number in [0, 1]",
    ),
    (
        "scorer_opt",
        "batch_size=x",
        "polytox: error: scorer 'fake' option batch_size='x': batch_size takes an integer >= 0",
        "polytox: error: scorer 'fake' option batch_size='x': batch_size takes an integer >= 0",
        "BadValueError: scorer 'fake' option batch_size='x': batch_size takes an integer >= 0",
    ),
    (
        "scorer_opt",
        "delay=-1",
        "polytox: error: scorer 'fake' option delay='-1': delay takes a number >= 0",
        "polytox: error: scorer 'fake' option delay='-1': delay takes a number >= 0",
        "BadValueError: scorer 'fake' option delay='-1': delay takes a number >= 0",
    ),
    (
        "model_opt",
        "delay=-1",
        "polytox: error: backend 'fake' --model-opt delay='-1': delay takes a number >= 0",
        "polytox: error: backend 'fake' --model-opt delay='-1': delay takes a number >= 0",
        "BadValueError: backend 'fake' --model-opt delay='-1': delay takes a number >= 0",
    ),
    (
        "model_opt",
        "eos_rate=x",
        "polytox: error: backend 'fake' --model-opt eos_rate='x': eos_rate takes a number in [0, 1]",
        "polytox: error: backend 'fake' --model-opt eos_rate='x': eos_rate takes a number in [0, 1]",
        "BadValueError: backend 'fake' --model-opt eos_rate='x': eos_rate takes a number in [0, 1]",
    ),
    (
        "scorer",
        "nosuch",
        "polytox: error: unknown scorer 'nosuch'. Known: default, detoxify, fake, hf, lexicon, llama-guard, perspective, polytox-ml, svm.",
        "polytox: error: unknown scorer 'nosuch'. Known: default, detoxify, fake, hf, lexicon, llama-guard, perspective, polytox-ml, svm.",
        "PolytoxError: unknown scorer 'nosuch'. Known: default, detoxify, fake, hf, lexicon, llama-guard, perspective, polytox-ml, svm.",
    ),
    (
        "backend",
        "nosuch",
        "polytox: error: unknown generator 'nosuch'. Known: fake, openai, transformers, vllm.",
        "polytox: error: unknown generator 'nosuch'. Known: fake, openai, transformers, vllm.",
        "PolytoxError: unknown generator 'nosuch'. Known: fake, openai, transformers, vllm.",
    ),
]


def as_yaml(key: str, value: str) -> Any:
    """The value as a YAML config holds it (a list for a repeatable flag; ``=`` stays text)."""
    if key in LISTS:
        return [value]
    return value if value == "=" else yaml.safe_load(value)


def cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The stderr of ``polytox ARGV``, which must exit 2 and print nothing on stdout."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    return captured.err.strip()


@pytest.mark.parametrize(("key", "value", "flag_line", "yaml_line", "keyword_error"), PINNED)
def test_refusals_read_as_before(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: str,
    flag_line: str,
    yaml_line: str,
    keyword_error: str,
) -> None:
    flag = "--" + key.replace("_", "-")
    argv = ["eval", "--out", str(tmp_path / "f"), "--model", "fake", "--scorer", "fake", "--no-progress"]
    assert cli_error(capsys, [*argv, flag, value]) == flag_line
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({**BASE, key: as_yaml(key, value)}))
    got = cli_error(capsys, ["eval", "--out", str(tmp_path / "y"), "--config", str(config), "--no-progress"])
    assert got.replace(str(config), "CONFIG") == yaml_line
    with pytest.raises(polytox.PolytoxError) as caught:
        polytox.evaluate(out=tmp_path / "k", **{**BASE, key: as_yaml(key, value)})
    assert f"{type(caught.value).__name__}: {caught.value}" == keyword_error


def test_a_fake_run_keeps_its_hash_scorer_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--out", str(tmp_path / "run"), "--model", "fake", "--scorer", "fake", "--samples", "3"]
    assert main([*argv, "--limit", "6", "--no-progress", "--json", "--executor", "serial"]) == 0
    out = capsys.readouterr().out
    run = polytox.open_run(tmp_path / "run")
    assert run.spec.spec_hash() == "3a178f56771d4ae6"
    assert '"scorer": "fake@1-71b4ca8a"' in out
    assert (
        hashlib.sha256(out.encode()).hexdigest() == "a89e155328b2ba81724580b2f05acca8c96ab2e44b0d122616ad6582a3c7dab9"
    )
