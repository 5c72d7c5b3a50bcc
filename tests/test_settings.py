"""The settings table (``polytox.settings``) is the one declaration of every run setting: the flags of
``polytox eval``, the YAML keys, the checks, ``polytox.evaluate``'s keywords and docs/settings.md come from it,
and the spec dataclasses take their defaults from it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import polytox
from polytox import settings as S
from polytox.cli.main import build_parser
from polytox.errors import PolytoxError
from polytox.spec import SECTION_CLASSES, EvalSpec, spec_from_flat

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "polytox"


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)]


def _flags(call: ast.Call) -> set[str]:
    return {a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}


def test_every_setting_is_declared_once_in_src() -> None:
    """One row per setting; no flag of ``eval`` written by hand; no range of a run setting in the CLI's table;
    ``samples`` and ``top_p`` declared nowhere else (no flag, no range, no default, no FLAT_KEYS)."""
    rows: dict[str, int] = {}
    eval_flags: set[str] = set()
    flags_anywhere: set[str] = set()
    # the rows of the metrics settings and of flags that mean something else in some commands (another seed,
    # another --lang): tests/test_shared_flags.py checks they are not run settings declared again
    other_tables = {SRC / "metrics" / "settings.py", SRC / "cli" / "flags.py"}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path in other_tables:
            continue
        for call in _calls(tree, "_row") if path == SRC / "settings.py" else _calls(tree, "Setting"):
            key = call.args[0]
            assert isinstance(key, ast.Constant), f"{path}: a Setting declared outside the table"
            rows[key.value] = rows.get(key.value, 0) + 1
        for call in _calls(tree, "add_argument"):
            flags_anywhere |= _flags(call)
            if path.name == "eval_cmd.py":
                eval_flags |= _flags(call)
    assert rows == {s.key: 1 for s in S.TABLE}
    assert not eval_flags & {s.option for s in S.TABLE}, "an eval flag written by hand: add a row instead"
    assert not flags_anywhere & {"--samples", "-k", "--top-p", "--top-k", "--max-new-tokens", "--temperature"}
    from polytox.cli import checks

    assert not {f.key for f in checks.FLAG_NUMBERS} & {"samples", "top_p", "temperature", "top_k", "max_new_tokens"}
    assert not hasattr(checks, "NUMBERS") and not hasattr(polytox.spec, "FLAT_KEYS")
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.rglob("*.py"))
    assert text.count("SAMPLES,") + text.count("range=SAMPLES") >= 1
    assert len(re.findall(r"range=SAMPLES\b", text)) == 1  # samples' range: in its row only
    assert len(re.findall(r"\bC\.RTP_SAMPLES, \"continuations", text)) == 1  # its default: in its row only


def test_spec_fields_take_their_defaults_from_the_table() -> None:
    """Every field with a row is written ``= TABLE_DEFAULT`` (no second default) and holds the row's default."""
    tree = ast.parse((SRC / "spec.py").read_text(encoding="utf-8"))
    written = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith("Spec"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    written[(node.name, item.target.id)] = ast.unparse(item.value) if item.value else ""
    klasses = {**SECTION_CLASSES, "": EvalSpec}
    from polytox.executors.base import ExecutorConfig

    for s in S.TABLE:
        if s.section == "command":  # read by ``polytox eval`` only: no dataclass holds it
            continue
        if s.section == "executor":  # ``ExecutorConfig`` takes its defaults from the table too
            assert {f.name: f.default for f in dataclasses.fields(ExecutorConfig)}[s.name] == s.default, s.key
            continue
        klass = klasses[s.section]
        assert written[(klass.__name__, s.name)] == "TABLE_DEFAULT", (klass.__name__, s.name)
        field = {f.name: f for f in dataclasses.fields(klass)}[s.name]
        assert field.default == s.default


def test_the_executor_choices_are_the_executors() -> None:
    from polytox.executors import EXECUTORS
    from polytox.executors.base import ExecutorConfig

    assert S.BY_KEY["executor"].choices == EXECUTORS
    assert {s.name for s in S.rows("executor")} <= {f.name for f in dataclasses.fields(ExecutorConfig)}


def test_the_eval_flags_are_the_rows() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices and "eval" in a.choices)
    eval_parser = sub.choices["eval"]  # type: ignore[index]
    by_dest = {a.dest: a for a in eval_parser._actions}
    for s in S.TABLE:
        if not s.flag:
            assert s.key not in by_dest
            continue
        action = by_dest[s.key]
        assert s.option in action.option_strings and action.help == s.help.replace("%", "%%")
        if s.range is not None:
            assert action.type.checked.rule == s.range  # type: ignore[union-attr]


def test_docs_settings_reference_is_current() -> None:
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert page == S.reference_markdown(), "regenerate docs/settings.md (the command is on its first lines)"
    for s in S.TABLE:
        assert (f"`{s.option}`" in page) == s.flag


def test_docs_python_shows_the_generated_signature() -> None:
    """docs/python.md holds ``evaluate``'s signature as ``help()`` prints it, between its markers."""
    from polytox.api.evaluation import signature_text

    page = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    block = page.split("<!-- evaluate-signature -->")[1]
    assert block.strip() == f"```text\n{signature_text()}\n```", "paste signature_text() into docs/python.md"


def test_evaluate_keywords_and_docstring_come_from_the_table() -> None:
    params = inspect.signature(polytox.evaluate).parameters
    keywords = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords == (S.CONFIG_KEYS - S.COMMAND_KEYS) | {"config", "retry_failed", "generations_from", "progress"}
    assert params["samples"].annotation == "int | None" and params["lang"].annotation.startswith("str | Sequence")
    assert params["chat_template"].annotation == "Literal['auto', 'always', 'never'] | None"
    doc = inspect.getdoc(polytox.evaluate) or ""
    for s in S.TABLE:
        if s.flag and s.key != "executor" and s.section != "command":
            assert f"{s.key}: {s.help} (``{s.option}``)." in doc
    assert "verify:" not in doc and "max_failed:" not in doc


def test_the_typed_keywords_are_the_table() -> None:
    """``EvaluateSettings`` (what mypy and an editor see) has one key per keyword row, typed as the row says."""
    from polytox.api.evaluation import keywords
    from polytox.api.keywords import EvaluateSettings

    typed = {key: getattr(hint, "__forward_arg__", hint) for key, hint in EvaluateSettings.__annotations__.items()}
    assert typed == {s.key: s.annotation() for s in keywords()}
    assert typed["top_p"] == "float | None" and "sampels" not in typed


def test_the_command_keys_come_from_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out``, ``--max-failed`` and ``--verify`` are keys of ``--config`` too (``--help``: every flag has a key)."""
    from polytox.cli.main import main

    config = tmp_path / "run.yaml"
    run = tmp_path / "run"
    config.write_text(f"out: {run}\nmodel: fake\nscorer: fake\nlimit: 2\nsamples: 2\nmax_failed: '0'\n")
    assert main(["eval", "--config", str(config), "--no-progress", "--json"]) == 0
    assert (run / "manifest.json").exists()
    capsys.readouterr()
    config.write_text(f"out: {run}\nverify: true\n")
    assert main(["eval", "--config", str(config)]) == 0
    assert "no damage found" in capsys.readouterr().out
    with pytest.raises(polytox.PolytoxError, match="verify is a key of polytox eval"):
        polytox.evaluate(config=config)
    with pytest.raises(polytox.PolytoxError, match="has no option 'verify'"):
        polytox.evaluate(out=run, verify=True)  # type: ignore[call-arg]


def test_the_hash_marks_are_what_identity_keeps() -> None:
    """``hashed`` rows are in the spec hash, the others are not: changing one of them keeps the hash."""
    base = spec_from_flat({"model": "fake"})
    changed = {"threshold": 0.3, "comparison": ">", "n_bootstrap": 10, "preset": "rtp",
               "fluency_model": "gpt2"}
    for key, value in changed.items():
        assert not S.BY_KEY[key].hashed
        other = spec_from_flat({"model": "fake", key: value, **({"samples": 25} if key == "preset" else {})})
        assert other.spec_hash() == base.spec_hash(), key
    assert not S.BY_KEY["fluency_samples"].hashed
    other = spec_from_flat({"model": "fake", "fluency_model": "gpt2", "fluency_samples": 2})
    assert other.spec_hash() == base.spec_hash()
    for key, value in {"samples": 3, "top_p": 0.5, "seed": 2, "shard_size": 7, "limit": 3}.items():
        assert S.BY_KEY[key].hashed
        assert spec_from_flat({"model": "fake", key: value}).spec_hash() != base.spec_hash(), key


def test_hashes_of_existing_runs_do_not_change() -> None:
    """Spec hashes recorded before the table existed (manifests of earlier releases keep resuming)."""
    assert EvalSpec().spec_hash() == "61ed09b59f876e76"
    assert spec_from_flat({"samples": 3, "model": "fake"}).spec_hash() == "a835a0a4b6d50434"


def test_a_row_and_its_dataclass_must_agree() -> None:
    @dataclasses.dataclass(frozen=True)
    class Incomplete:
        threshold: float = S.TABLE_DEFAULT

    with pytest.raises(RuntimeError, match="disagree on"):
        S.from_table("metrics")(Incomplete)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("samples", 0, "samples must be in [1, 10000], got 0"),
    ("n_bootstrap", 2 * 10**9, "n_bootstrap must be in [0, 100000], got 2000000000"),
    ("n_bootstrap", 10**23, "n_bootstrap must be in [0, 100000], got 100000000000000000000000"),
    ("top_p", 2, "top_p must be in (0, 1], got 2.0"),
    ("chat_template", "sometimes", "chat_template must be auto|always|never"),
    ("comparison", "<", "comparison must be one of ('>=', '>')"),
    ("format", "xml", "format must be one of auto, rtp, ptp, rtplx, generic, demo, got 'xml'"),
])
def test_the_table_refuses_with_the_lines_users_know(key: str, value: object, words: str) -> None:
    with pytest.raises(PolytoxError) as info:
        spec_from_flat({key: value})
    assert str(info.value) == f"invalid spec: {words}"
