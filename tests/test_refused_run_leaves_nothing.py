"""A refused run leaves no file behind, whatever the source of the bad value (issue 63).

Execution settings and component options (scorer, generator backend, detox method) are checked by the
schema before the run directory is opened: for each bad value below, given as a flag of ``polytox eval``,
as a key of its YAML config and as a keyword of ``polytox.evaluate``, the refusal leaves the ``--out``
folder absent. (Before, ``executor: foo`` from YAML or a keyword wrote ``manifest.json`` and
``prompts.parquet`` first.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import polytox
from polytox.cli.main import main

TRANSFORMERS = {"backend": "transformers", "model": "gpt2"}  # refused on its options, before the model is looked up

# (key, bad value, the run's other settings): execution settings, then scorer, backend and detox options
BAD: list[tuple[str, str, dict[str, str]]] = [
    ("executor", "foo", {}),
    ("workers", "0", {}),
    ("queue_depth", "0", {}),
    ("cpus_per_worker", "0", {}),
    ("score_gpus_per_worker", "-1", {}),
    ("scorer_opt", "fail_rate=2", {}),
    ("scorer_opt", "nosuch=1", {}),
    ("model_opt", "toxicity=2", {}),
    ("model_opt", "nosuch=1", {}),
    ("model_opt", "sampler=heap", TRANSFORMERS),  # a backend option's choices
    ("model_opt", "slots=-1", TRANSFORMERS),  # a backend option's range (or 'auto')
    ("detox", "word-filter:end=middle", {}),  # a detox option's choices
    ("detox", "pplm:iterations=-1", {}),  # a detox option's range
    ("detox", "vocab-shift:beta=x", TRANSFORMERS),  # a detox option's type, on a backend that runs detox
    ("detox", "vocab-shift", TRANSFORMERS),  # a required detox option missing (before: refused once the run existed)
]
# the words naming the option where the refusal is not ``OPTION=...`` or ``'OPTION'``
NAMED = {"vocab-shift": "needs path=..."}


def typed(key: str, value: str) -> Any:
    """The value as YAML or a keyword holds it: a list for a repeatable flag, else the YAML scalar."""
    return [value] if key.endswith("_opt") else yaml.safe_load(value)


def left(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.parametrize(("key", "value", "other"), BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_a_refused_run_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str, other: dict[str, Any]
) -> None:
    base = {"model": "fake", "scorer": "fake", "limit": 2, "samples": 1, **other}
    flag = "--" + key.replace("_", "-")
    argv = ["eval", "--out", str(tmp_path / "flag"), "--scorer", "fake", "--no-progress"]
    argv += [part for k, v in {"model": "fake", **other}.items() for part in ("--" + k, v)]
    try:
        code = main([*argv, flag, value])
    except SystemExit as exc:
        code = exc.code
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({**base, key: typed(key, value)}))
    assert main(["eval", "--out", str(tmp_path / "yaml"), "--config", str(config), "--no-progress"]) == 2
    with pytest.raises(polytox.PolytoxError) as refused:
        polytox.evaluate(out=tmp_path / "keyword", **{**base, key: typed(key, value)})
    err = capsys.readouterr().err
    assert err.count("polytox: error:") == 2  # the flag's and the YAML's refusal, one line each
    if key in ("scorer_opt", "model_opt", "detox"):  # refused for the option itself, each way it was given
        option = value.rpartition(":")[2].partition("=")[0]
        words = (NAMED[value],) if value in NAMED else (f"{option}=", f"{option!r}")
        assert any(w in str(refused.value) for w in words), refused.value
        assert all(any(w in line for w in words) for line in err.splitlines()), err
    assert (code, left(tmp_path / "flag"), left(tmp_path / "yaml"), left(tmp_path / "keyword")) == (2, [], [], [])
