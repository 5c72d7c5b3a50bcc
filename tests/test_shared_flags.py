"""The flags several commands take are declared once (``cli.flags``), and read as they always did.

- every ``--threshold``, ``--seed``, ``--lang``, ``--scorer``, ... of every subcommand is what ``cli.flags.add``
  makes of one row (its help, type, range, choices and default), and no source file outside ``cli/flags.py``
  hands one of these option strings to argparse;
- ``polytox metrics``'s flags and ``Run.metrics``'s keywords are the rows of ``metrics.settings``, and a bad
  value is refused in the same words by both;
- pinned: each shared flag's ``--help`` entry and the one-line refusal of bad values, per command
  (``tests/data/shared_flags_pins.json``; regenerate with ``python -m tests.test_shared_flags`` from the
  repository root, with ``PYTHONPATH=src``, and read the diff).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from polytox import settings as S
from polytox.api.run import Metrics, Run
from polytox.cli import flags as F
from polytox.cli.main import build_parser, main
from polytox.errors import BadValueError
from polytox.metrics import settings as M

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "polytox"
PINS = ROOT / "tests" / "data" / "shared_flags_pins.json"
# commands where a config file may give the scorer (or every setting): their flags default to None
UNSET = {"eval", "score", "serve"}
BAD_VALUES = {
    "--threshold": ["2", "-0.1", "x", "nan"],
    "--seed": ["-1", "1.5", "x"],
    "--n-bootstrap": ["-1", "x", "0"],
    "--comparison": ["=="],
}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """(command path, parser) of every subcommand and sub-subcommand."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                out += [(path, sub), *subcommands(sub, path)]
    return out


def shared_actions() -> list[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    return [(cmd, sub, a) for cmd, sub in subcommands(build_parser()) for a in sub._actions
            if set(a.option_strings) & set(F.SHARED_OPTIONS)]


def all_rows() -> list[S.Setting]:
    """Every row a shared flag may come from: the run settings, the metrics settings, ``cli.flags``'s own."""
    own = [v for v in vars(F).values() if isinstance(v, S.Setting)]
    return [r for r in [*S.TABLE, *M.METRICS_SETTINGS, *own] if r.option in F.SHARED_OPTIONS and r.flag]


def signature(action: argparse.Action) -> tuple[Any, ...]:
    """What a reader of ``--help`` and of a refusal sees of a flag, but its default and dest."""
    checked = getattr(action.type, "checked", None)
    return (tuple(action.option_strings), type(action).__name__, action.help, action.metavar, action.nargs,
            action.const, tuple(action.choices or ()), getattr(action.type, "__name__", None),
            checked.rule if checked else None)


def test_every_shared_flag_is_one_rows_declaration() -> None:
    """Each shared flag of each command matches what ``flags.add`` makes of exactly one row."""
    made = {}
    for row in all_rows():
        made[id(row)] = F.add(argparse.ArgumentParser(), row)
    seen: dict[str, set[str]] = {}
    for cmd, _, action in shared_actions():
        matches = [r for r in all_rows() if signature(made[id(r)]) == signature(action)]
        assert len({(r.help, r.kind) for r in matches}) == 1, f"{cmd} {action.option_strings}: {len(matches)} rows"
        row = matches[0]
        wanted = made[id(row)].default
        assert action.default == (None if cmd.split()[0] in UNSET else wanted), (cmd, action.option_strings)
        seen.setdefault(action.option_strings[0], set()).add(row.help)
    assert set(seen) == set(F.SHARED_OPTIONS)
    # one meaning for the flags the issue counted 7 and 4 times; --lang has five (filter, training, corpus ...)
    assert len(seen["--threshold"]) == len(seen["--scorer-opt"]) == len(seen["--comparison"]) == 1
    assert len(seen["--lang"]) == 5 and len(seen["--seed"]) == 3


def test_no_run_setting_is_declared_again() -> None:
    """The rows outside ``settings.TABLE`` mean something else than the run setting of the same key (their
    help says what), and the metrics settings that are run settings are the run settings' own rows."""
    own = [r for r in all_rows() if not any(r is t for t in S.TABLE)]
    assert len(own) == 13  # 4 metrics settings, 9 of cli.flags
    for row in own:
        run = S.BY_KEY.get(row.key)
        assert run is None or (row.help, row.default) != (run.help, run.default), row.key
    assert all(M.BY_KEY[k] is S.BY_KEY[k] for k in ("threshold", "comparison", "n_bootstrap"))


def test_no_shared_flag_is_declared_twice_in_the_sources() -> None:
    """No ``add_argument("--threshold", ...)`` (or any shared option string) outside ``cli/flags.py``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                names = {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                if names & set(F.SHARED_OPTIONS):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {sorted(names)}")
    assert found == []
    text = (SRC / "cli" / "flags.py").read_text(encoding="utf-8")
    assert text.count(".add_argument(") == 1  # ``add`` is the one call


def test_the_source_check_finds_a_hand_declared_flag(tmp_path: Path) -> None:
    tree = ast.parse('p.add_argument("--threshold", type=float)\nq.add_argument("--top", type=int)\n')
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"]
    hits = [n for n in calls if {a.value for a in n.args if isinstance(a, ast.Constant)} & set(F.SHARED_OPTIONS)]
    assert [n.lineno for n in hits] == [1]


def test_metrics_flags_and_keywords_are_the_metrics_rows() -> None:
    parser = dict(subcommands(build_parser()))["metrics"]
    dests = [a.dest for a in parser._actions if set(a.option_strings) & set(F.SHARED_OPTIONS)]
    assert sorted(dests) == sorted(M.BY_KEY)
    params = inspect.signature(Metrics.__call__).parameters
    assert [p for p in params if p != "self"] == [s.key for s in M.METRICS_SETTINGS]
    for row in M.METRICS_SETTINGS:
        assert params[row.key].default == row.default
        action = next(a for a in parser._actions if a.dest == row.key)
        assert action.default == row.default and action.help == row.help


@pytest.mark.parametrize(("key", "value", "flag_value"), [
    ("threshold", 2, "2"), ("threshold", -0.1, "-0.1"), ("n_bootstrap", -1, "-1"), ("n_bootstrap", 10**23, str(10**23)),
    ("seed", -1, "-1"),
])
def test_a_bad_metrics_value_reads_the_same_from_flag_and_keyword(
    key: str, value: Any, flag_value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The keyword is refused before the run is read (``Metrics`` here holds no run), in the flag's words."""
    with pytest.raises(BadValueError) as caught:
        Metrics(cast(Any, None), {})(**{key: value})
    flag = "--" + key.replace("_", "-")
    with pytest.raises(SystemExit) as exited:
        main(["metrics", "RUN", f"{flag}={flag_value}"])
    line = capsys.readouterr().err.strip()
    assert exited.value.code == 2 and caught.value.key == key
    assert str(caught.value).startswith(f"{key} ")
    assert f"argument {flag}: {str(caught.value).removeprefix(key + ' ')} (see" in line


def test_compute_metrics_is_a_warning_alias_of_metrics() -> None:
    run = Run.__new__(Run)
    run.__dict__["metrics"] = Metrics(run, {})  # the cached property, without a run directory
    with pytest.warns(DeprecationWarning, match=r"compute_metrics is deprecated: use run\.metrics"), \
            pytest.raises(BadValueError, match=r"^threshold must be in \[0, 1\], got 2\.0$"):
        run.compute_metrics(threshold=2)


def test_keyword_values_are_converted_by_their_rows() -> None:
    got = M.checked({"threshold": "0.25", "seed": 3.0, "scorer": None})
    assert got == {"threshold": 0.25, "seed": 3, "scorer": None}
    with pytest.raises(BadValueError, match=r"^invalid value for 'threshold': expected a number, got 'high'$"):
        M.checked({"threshold": "high"})


# ---- pinned: each shared flag's help entry and the refusals of bad values, per command ---------------------
def render() -> dict[str, Any]:
    """The pinned texts (at 100 columns): {"entries": {command: {flag: help entry}}, "errors": {argv: [code,
    stderr]}}."""
    entries: dict[str, dict[str, str]] = {}
    errors: dict[str, list[Any]] = {}
    for cmd, sub, action in shared_actions():
        formatter = sub._get_formatter()
        formatter.add_argument(action)
        flag = action.option_strings[0]
        entries.setdefault(cmd, {})[flag] = formatter.format_help()
        for bad in BAD_VALUES.get(flag, []):
            argv = [*cmd.split(), f"{flag}={bad}"]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code: int | str | None
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code
            errors[" ".join(argv)] = [code, err.getvalue()]
    return {"entries": entries, "errors": errors}


def test_shared_flags_read_as_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    pinned, now = json.loads(PINS.read_text(encoding="utf-8")), render()
    assert now["errors"] == pinned["errors"]
    assert now["entries"] == pinned["entries"]
    assert len(pinned["errors"]) >= 80 and all(code == 2 for code, _ in pinned["errors"].values())


if __name__ == "__main__":
    os.environ["COLUMNS"] = "100"
    sys.stdout.write(json.dumps(render(), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
