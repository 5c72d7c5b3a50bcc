"""The Python API (``polytox.evaluate``, ``polytox.score``, ``polytox.open_run``) against the command line:
the same work gives the same metrics, the same scores and the same error lines."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import polytox
from polytox.errors import PolytoxError
from polytox.settings import CONFIG_KEYS

from .core_helpers import cli_env, eval_args, run_cli, write_jsonl

# a fake-model run over 8 demo prompts in three languages, 3 samples each, some scores failing
FLAGS: dict[str, Any] = {"samples": 3, "limit": 8, "lang": ["en", "de", "fr"], "seed": 5, "shard_size": 3,
                         "scorer_opt": ["fail_rate=0.2"]}


def cli_eval(capsys: pytest.CaptureFixture[str], out: Path) -> dict[str, Any]:
    code, stdout, _ = run_cli(capsys, *eval_args(out, **FLAGS), "--json", "--max-failed", "100%")
    assert code == 0
    metrics: dict[str, Any] = json.loads(stdout)
    return metrics


def test_evaluate_returns_what_eval_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = cli_eval(capsys, tmp_path / "cli")
    result = polytox.evaluate(model="fake", prompts="demo", scorer="fake", out=tmp_path / "api", **FLAGS)
    assert json.loads(json.dumps(result.metrics)) == expected
    assert expected["overall"]["n_generations"] == 24 and expected["overall"]["n_missing_scores"] > 0
    assert result.path == tmp_path / "api" and result.spec.generation.samples == 3
    # a spec, as before, gives the same run (and resumes the directory the keywords made)
    again = polytox.evaluate(result.spec, tmp_path / "api")
    assert again.resumed and again.metrics == result.metrics


def test_score_returns_what_score_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = ["you are a wonderful person", "", "Ich hasse dich, du Idiot", "merci beaucoup", "   ", "x" * 50]
    langs = [None, None, "de", "fr", "en", None]
    src = write_jsonl(tmp_path / "texts.jsonl", [{"id": str(i), "text": t, **({"lang": lang} if lang else {})}
                                                  for i, (t, lang) in enumerate(zip(texts, langs, strict=True))])
    out = tmp_path / "scored.jsonl"
    code, _, _ = run_cli(capsys, "score", "--scorer", "fake", "--scorer-opt", "fail_rate=0.3", "--input", src,
                         "--out", out, "--no-progress")
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = polytox.score(texts, scorer="fake", langs=langs, options={"fail_rate": "0.3"})
    assert [g.value for g in got] == [r["toxicity"] for r in rows]
    assert [g.error for g in got] == [r["error"] for r in rows]
    assert [(g.lang, g.lang_detected) for g in got] == [(r["lang"], r["lang_detected"]) for r in rows]
    assert got[1].value is None and got[1].error is not None and got[1].error.startswith("EMPTY_TEXT")
    assert any(g.value is not None for g in got) and {g.scorer for g in got} == {rows[0]["scorer"]}
    # the same texts again come from the score cache (the command's cache), with the same values
    assert [g.value for g in polytox.score(texts, scorer="fake", langs=langs, options=["fail_rate=0.3"])] == \
        [g.value for g in got]


def test_open_run_reads_what_metrics_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    cli_eval(capsys, run_dir)
    code, stdout, _ = run_cli(capsys, "metrics", run_dir, "--threshold", "0.3", "--n-bootstrap", "200", "--json")
    assert code == 0
    run = polytox.open_run(run_dir)
    assert json.loads(json.dumps(run.metrics(threshold=0.3, n_bootstrap=200))) == json.loads(stdout)
    assert run.metrics(seed=5)["overall"] == json.loads((run_dir / "metrics.json").read_text())["overall"]
    assert run.spec.generation.samples == 3 and run.manifest["spec"]["seed"] == 5
    for bad in (10**23, 2 * 10**9, -1):  # a clear line, never numpy's ValueError or an out-of-memory error
        with pytest.raises(PolytoxError, match=rf"^n_bootstrap must be in \[0, 100000\], got {bad}$"):
            run.metrics(n_bootstrap=bad)
    generations, scores = run.generations(), run.scores()
    assert len(generations) == len(scores) == 24 and len(run.prompts()) == 8
    assert list(generations[["prompt_id", "sample_index"]].itertuples(index=False)) == \
        list(scores[["prompt_id", "sample_index"]].itertuples(index=False))
    failed = scores[scores["error"].notna()]
    assert len(failed) == run.metrics()["overall"]["n_missing_scores"] and failed["toxicity"].isna().all()


@pytest.mark.parametrize(("flags", "keywords", "ranged"), [
    (["--samples", "0"], {"samples": 0}, "must be in [1, 10000], got 0"),
    (["--top-p", "2"], {"top_p": 2}, "must be in (0, 1], got 2.0"),
    (["--scorer", "nosuch"], {"scorer": "nosuch"}, None),
    (["--scorer-opt", "bogus=1"], {"scorer_opt": {"bogus": 1}}, None),
    (["--lang", "xx"], {"lang": "xx"}, None),
])
def test_bad_arguments_raise_the_line_eval_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   flags: list[str], keywords: dict[str, Any],
                                                   ranged: str | None) -> None:
    try:
        code, _, err = run_cli(capsys, *eval_args(tmp_path / "cli"), *flags)
    except SystemExit as exc:  # a flag's range is argparse's check: it exits 2 while the flags are read
        code, err = int(exc.code or 0), capsys.readouterr().err
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith("polytox: error: ")
    with pytest.raises(polytox.PolytoxError) as caught:
        polytox.evaluate(**{"model": "fake", "scorer": "fake", "out": tmp_path / "api", **keywords})
    if ranged is None:
        assert f"polytox: error: {caught.value}" == line
    else:  # one range rule (_util/ranges.py): the flag names it as --flag, the API as its keyword
        key = next(iter(keywords))
        assert f"argument {flags[0]}" in line and f"{key} {ranged}" in str(caught.value) and line.count(ranged) == 1
    assert not (tmp_path / "api").exists()  # refused before any work


def test_bad_arguments_of_score_and_open_run(tmp_path: Path) -> None:
    with pytest.raises(polytox.PolytoxError, match="unknown scorer 'nosuch'"):
        polytox.score(["a"], scorer="nosuch")
    with pytest.raises(polytox.PolytoxError, match=r"2 text\(s\) but 1 language"):
        polytox.score(["a", "b"], scorer="fake", langs=["en"])
    with pytest.raises(polytox.PolytoxError, match="takes a list of texts"):
        polytox.score("one text", scorer="fake")
    with pytest.raises(polytox.PolytoxError, match="not a polytox run directory"):
        polytox.open_run(tmp_path)
    with pytest.raises(polytox.PolytoxError, match=r"no option 'sample' \(did you mean 'samples'\?\)"):
        polytox.evaluate(model="fake", out=tmp_path / "x", sample=2)
    with pytest.raises(polytox.PolytoxError, match="needs --out"):
        polytox.evaluate(model="fake")
    with pytest.raises(polytox.PolytoxError, match="give the run directory as out="):
        polytox.evaluate(str(tmp_path / "x"))  # type: ignore[arg-type]


def test_evaluate_takes_every_flag_of_eval() -> None:
    params = inspect.signature(polytox.evaluate).parameters
    named = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    # every spec and execution flag is a named keyword or goes through **options (checked against the same set)
    assert named - {"config", "retry_failed", "generations_from", "progress"} <= CONFIG_KEYS
    assert {"model", "prompts", "samples", "limit", "lang", "scorer", "scorer_opt", "preset", "max_new_tokens",
            "backend"} <= named


def test_the_root_is_a_lazy_facade() -> None:
    assert set(polytox.__all__) >= {"evaluate", "score", "open_run", "PolytoxError", "RunResult", "EvalSpec"}
    assert all(hasattr(polytox, name) for name in polytox.__all__)
    code = "import sys, polytox; print(sorted(m for m in ('polytox.runner', 'polytox.api', 'polytox.scoring') " \
           "if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(Path("/nonexistent")), capture_output=True,
                          text=True, check=True)
    assert proc.stdout.strip() == "[]"
