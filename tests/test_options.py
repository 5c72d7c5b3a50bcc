"""One option mechanism for scorers, generator backends and detox methods (``polytox._util.options``).

Each component declares its options once, as ``OPTIONS`` (a detox method: its entry of ``METHODS``); the
declaration is what is checked, typed and listed. Every declared numeric range refuses a value outside it
through the CLI with one ``polytox: error:`` line naming the component, the option, the allowed range and the
value given, before any work (no run folder, no output file).
"""

from __future__ import annotations

import inspect
import json
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest

from polytox._util import ranges as R
from polytox._util.options import Option, check_options, declared_options, format_options, option_rows
from polytox.cli.main import main
from polytox.detox.methods import METHODS
from polytox.errors import BadValueError
from polytox.registry import GENERATORS, SCORERS, resolve
from polytox.scoring import scorer_schema

SRC = Path(__file__).resolve().parents[1] / "src"


def components() -> list[tuple[str, str, str, Mapping[str, Option]]]:
    """(kind, name, module path, declared options) of every built-in scorer, backend and detox method."""
    out: list[tuple[str, str, str, Mapping[str, Option]]] = []
    for kind, table in (("scorer", SCORERS), ("generator", GENERATORS)):
        for name, target in table.items():
            if not isinstance(target, str):  # registered at run time (a test's plug-in), not a built-in
                continue
            declared = declared_options(resolve(kind, name))
            assert declared is not None, f"{kind} {name!r} declares no OPTIONS"
            out.append((kind, name, target.split(":")[0], declared))
    for name, (_, _, options) in METHODS.items():
        out.append(("detox", name, "polytox.detox.methods", options))
    return out


def module_source(module: str) -> str:
    return (SRC / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")


DECLARATION = re.compile(r'"(\w+)": Option\(')


def test_each_option_is_declared_exactly_once() -> None:
    """Each module holds one ``"name": Option(`` per option of the components it declares, and nothing else
    declares options: no parallel module table, defaults dict or key tuple is left."""
    wanted: dict[str, Counter[str]] = {}
    for _, _, module, options in components():
        wanted.setdefault(module, Counter()).update(list(options))
    from polytox.scoring.hf_classifier import ENGINE_OPTIONS
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    for module, names in wanted.items():
        source = module_source(module)
        if "**ENGINE_OPTIONS" in source and not source.count("ENGINE_OPTIONS: dict"):
            names = names - Counter(list(ENGINE_OPTIONS))  # engine options: declared once, shared
        if "**PolytoxMlScorer.OPTIONS" in source:  # ``default``: polytox-ml's options, declared there
            names = names - Counter(list(PolytoxMlScorer.OPTIONS))
        assert Counter(DECLARATION.findall(source)) == names, module
    everywhere = [p for p in (SRC / "polytox").rglob("*.py") if DECLARATION.search(p.read_text(encoding="utf-8"))]
    declaring = {SRC / (m.replace(".", "/") + ".py") for m in wanted}
    assert set(everywhere) <= declaring | {SRC / "polytox/_util/options.py"}, sorted(map(str, everywhere))
    for module in ("polytox.generation.openai_backend", "polytox.generation.vllm_backend"):
        source = module_source(module)
        assert not re.search(r"^(OPTIONS|DEFAULTS|LLM_OPTIONS)\b", source, re.MULTILINE), module


def test_a_scorer_declares_what_its_constructor_takes() -> None:
    """No constructor parameter without a declaration and no declaration without a parameter; each default is
    written once, in the declaration, and the constructor's parameter reads it from there."""
    for name in SCORERS:
        factory = resolve("scorer", name)
        params = {p.name: p for p in inspect.signature(factory).parameters.values()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        declared = declared_options(factory) or {}
        passes_on = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())
        # ``default`` passes ``**ml_options`` to polytox-ml and declares polytox-ml's options beside its own
        assert set(params) <= set(declared) if passes_on else set(params) == set(declared), name
        source = inspect.getsource(factory.__init__)  # type: ignore[misc]
        for key, param in params.items():
            assert param.default == declared[key].default, (name, key)
            if param.default is not None:
                assert f'{key}: ' in source and f'OPTIONS["{key}"].default' in source, (name, key)
    fake = scorer_schema(resolve("scorer", "fake"))
    assert fake is not None and fake["fail_rate"].default == 0.0 and fake["batch_size"].default == 64
    default = scorer_schema(resolve("scorer", "default"))
    assert default is not None and {"routes", "lm_batch_size", "scale"} <= set(default)  # polytox-ml's join


def test_ranges_come_from_the_declaration_only() -> None:
    """A declared option's name gives it no range of its own: ``fail_rate`` is a probability because the fake
    generator says so, and an undeclared-range float takes any finite number."""
    check_options("x", {"fail_rate": Option("float")}, {"fail_rate": "2"})
    with pytest.raises(BadValueError, match=r"^backend 'x' --model-opt fail_rate='2': fail_rate takes a number in"):
        check_options("backend 'x'", {"fail_rate": Option("float", range=R.PROBABILITY)}, {"fail_rate": "2"},
                      flag="--model-opt")
    with pytest.raises(BadValueError, match="takes a number"):
        check_options("x", {"rate": Option("float")}, {"rate": "inf"})


def test_the_listing_shows_type_range_default_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    rows = option_rows({"delay": Option("float", range=R.NON_NEGATIVE, default=0.0, help="seconds"),
                        "mode": Option(choices=("a", "b"), default="a"), "on": Option("bool", default=True),
                        "size": Option("int", words=("auto",), range=R.COUNT), "text": Option(default="")})
    assert rows == [("delay", "float", ">= 0", "0.0", "seconds"), ("mode", "str", "a|b", "a", ""),
                    ("on", "bool", "true/false", "true", ""), ("size", "int", ">= 0 or auto", "-", ""),
                    ("text", "str", "text", '""', "")]
    assert format_options("scorer any", None) == "scorer any: takes any option (declares none)"
    for kind, lines in (("scorers", ["scorer fake", "fail_rate   float  [0, 1]   0.0"]),
                        ("generators", ["backend fake", "fail_rate  float  [0, 1]   0.0",
                                        "concurrency   int    >= 1"]),
                        ("detox", ["detox pplm", "horizon     int    >= 0     1"])):
        assert main(["scorers", "--options", kind]) == 0
        out = capsys.readouterr().out
        for line in lines:
            assert line in out, (kind, line, out)
    assert main(["scorers", "--options"]) == 0
    assert "scorer perspective" in capsys.readouterr().out


def outside(option: Option) -> list[str]:
    """Values just outside ``option``'s declared range: below its low end, above its high end."""
    rng = option.range
    assert rng is not None
    step = 1 if option.kind == "int" else 0.5
    values = []
    if rng.lo is not None:
        values.append(rng.lo if rng.lo_open else rng.lo - step)
    if rng.hi is not None:
        values.append(rng.hi if rng.hi_open else rng.hi + step)
    return [str(int(v)) if option.kind == "int" else str(float(v)) for v in values]


def ranged_cases() -> list[tuple[str, str, str, str, str]]:
    """(kind, name, option, value, expected error line) for every declared numeric range."""
    cases = []
    for kind, name, _, options in components():
        for key, option in options.items():
            if option.kind not in ("int", "float") or option.range is None:
                continue
            for value in outside(option):
                owner, flag = {"scorer": (f"scorer {name!r}", "option"), "generator": (f"backend {name!r}",
                               "--model-opt"), "detox": (f"--detox {name}", "option")}[kind]
                line = f"polytox: error: {owner} {flag} {key}={value!r}: {key} takes {option.accepts()}"
                cases.append((kind, name, key, value, line))
    return cases


CASES = ranged_cases()


def test_the_sweep_covers_every_kind() -> None:
    kinds = Counter(kind for kind, *_ in CASES)
    assert kinds["scorer"] >= 20 and kinds["generator"] >= 15 and kinds["detox"] >= 8, kinds
    assert ("generator", "fake", "fail_rate", "1.5") in [c[:4] for c in CASES]
    assert ("generator", "fake", "delay", "-0.5") in [c[:4] for c in CASES]


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("opts") / "p.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "text": f"text {i}", "lang": "en"}) + "\n" for i in range(2)))
    return path


@pytest.mark.parametrize(("kind", "name", "key", "value", "line"), CASES,
                         ids=[f"{k}-{n}-{o}={v}" for k, n, o, v, _ in CASES])
def test_every_declared_range_refuses_a_value_outside_it(kind: str, name: str, key: str, value: str, line: str,
                                                         prompts: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    if kind == "scorer":
        argv = ["score", "--input", str(prompts), "--out", f"{out}.jsonl", "--no-progress", "--scorer", name,
                "--scorer-opt", f"{key}={value}"]
    else:
        argv = ["eval", "--out", str(out), "--no-progress", "--model", "tiny", "--scorer", "fake", "--prompts",
                str(prompts), "--backend", name if kind == "generator" else "transformers"]
        argv += ["--model-opt", f"{key}={value}"] if kind == "generator" else ["--detox", f"{name}:{key}={value}"]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    stdout, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and lines == [line], (argv, err)
    assert stdout == "" and not out.exists() and not Path(f"{out}.jsonl").exists()


def test_the_options_page_is_current() -> None:
    """``docs/options.md`` is what ``polytox scorers --options all --markdown`` prints (regenerate it so)."""
    from polytox.cli.scorers_cmd import options_listing

    page = Path(__file__).resolve().parents[1] / "docs" / "options.md"
    assert page.read_text(encoding="utf-8") == options_listing("all", markdown=True) + "\n"
