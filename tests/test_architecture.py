"""The package's shape, as docs/architecture.md states it: no import cycle between modules, a small root,
no study module (research/) inside the shipped package, and no function longer than 100 lines. import-linter's
layer contracts run in ``make lint``; these checks cover what a layer contract cannot (cycles inside one
package)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import tomllib
from pathlib import Path

import pytest

import polytox

grimp = pytest.importorskip("grimp")

PACKAGE = Path(polytox.__file__).parent
CORE = {"__init__", "constants", "errors", "registry", "runner", "settings", "spec", "types"}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back() -> None:
    # imports made only for the type checker do not run: a package's face names its modules' types that way
    graph = grimp.build_graph("polytox", exclude_type_checking_imports=True)
    modules = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(modules) == []


def test_the_root_holds_only_the_core() -> None:
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root == CORE, f"new root modules {sorted(root - CORE)}: put them in a package (docs/architecture.md)"


def test_no_study_ships_in_the_package() -> None:
    studies = [p for p in PACKAGE.rglob("*.py") if p.stem.endswith("_trial") or p.stem in
               {"ablation", "lora_bundle", "probe_stability"}]
    assert studies == []
    mentions = [f"{p.relative_to(PACKAGE)}" for p in PACKAGE.rglob("*.py")
                if "research." in p.read_text(encoding="utf-8") or "_trial`" in p.read_text(encoding="utf-8")]
    assert mentions == []


MAX_FUNCTION_LINES = 100
# Folders not yet held to the limit, each named with the reason; none is left.
LONG_FUNCTIONS_ALLOWED_IN: tuple[str, ...] = ()


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``file:line name (N lines)`` of every function or method in ``root`` longer than ``limit`` lines, from
    its ``def`` line (or first decorator) to its last line."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > limit:
                    out.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_the_length_check_finds_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(100))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\ndef short():\n    return 1\n")
    assert long_functions(tmp_path) == ["long.py:1 long (101 lines)"]
    assert long_functions(tmp_path, limit=101) == []


def test_no_function_is_longer_than_100_lines() -> None:
    found = [f for f in long_functions(PACKAGE) if not f.startswith(LONG_FUNCTIONS_ALLOWED_IN)]
    assert found == [], f"split these functions (at most {MAX_FUNCTION_LINES} lines each): {found}"


def test_the_default_scorers_inference_stays_apart_from_its_training() -> None:
    """``scoring/ml/`` holds the scorer's inference only (at most 12 modules); training, measurement and
    fitting live in ``training/scorer/``. import-linter forbids the import; this checks the files."""
    inference = sorted(p.stem for p in (PACKAGE / "scoring" / "ml").glob("*.py"))
    assert len(inference) <= 12, inference
    assert {"scorer", "head", "embedder", "scales"} <= set(inference)
    training = {p.stem for p in (PACKAGE / "training" / "scorer").glob("*.py")}
    assert not training & set(inference) - {"__init__"}
    assert {"train", "pool", "measurements", "scale_fit"} <= training
    graph = grimp.build_graph("polytox")
    assert not graph.chain_exists(importer="polytox.scoring", imported="polytox.training", as_packages=True)
    assert graph.chain_exists(importer="polytox.cli", imported="polytox.training", as_packages=True)


# (importer, imported) pairs that would point up or sideways: detox registers its hooks for the spec and the
# generation backends (``polytox.registry.hook``); devices and dtypes come from ``_util.torch_device``
UPWARD = [
    ("polytox.spec", "polytox.detox"),
    ("polytox.generation", "polytox.detox"),
    ("polytox.generation", "polytox.scoring"),
    ("polytox.scoring", "polytox.generation"),
]


def test_no_arrow_points_up_between_spec_generation_scoring_and_detox() -> None:
    graph = grimp.build_graph("polytox")
    found = [pair for pair in UPWARD if graph.chain_exists(importer=pair[0], imported=pair[1], as_packages=True)]
    assert found == []
    assert graph.chain_exists(importer="polytox.detox", imported="polytox.generation", as_packages=True)
    # and no contract lets one through: the import-linter ignore lists name none of them
    contracts = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())["tool"]["importlinter"]
    ignored = [line for c in contracts["contracts"] for line in c.get("ignore_imports", [])]
    assert [line for line in ignored for a, b in UPWARD if line.startswith(a) and b in line] == []


def test_renamed_names_keep_working_and_warn() -> None:
    """Aliases listed in docs/architecture.md ("Deprecated aliases") work for one release, and warn."""
    from polytox.analysis import RunCollection, run_collection

    with pytest.warns(DeprecationWarning, match=r"polytox\.analysis\.Corpus is deprecated: use .*RunCollection"):
        from polytox.analysis import Corpus
    assert Corpus is RunCollection
    with pytest.warns(DeprecationWarning, match="run_collection.Corpus is deprecated"):
        assert run_collection.Corpus is RunCollection
    with pytest.raises(AttributeError, match="has no attribute 'Corpse'"):
        _ = run_collection.Corpse
    assert "### Deprecated aliases" in (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")


def packages_with_a_face(root: Path = PACKAGE) -> list[str]:
    """Dotted names of polytox's packages that have a face to check: all but ``_``-prefixed ones and those
    under a package whose ``__all__`` is empty (internal as a whole, like ``cli`` and ``training``)."""
    out = []
    for init in sorted(root.rglob("__init__.py")):
        parts = init.parent.relative_to(root).parts
        if not parts or any(p.startswith("_") for p in parts):
            continue
        parents = [".".join(parts[:i]) for i in range(1, len(parts))]
        if any(not importlib.import_module(f"polytox.{p}").__all__ for p in parents):
            continue
        out.append(".".join(parts))
    return out


@pytest.mark.parametrize("package", packages_with_a_face())
def test_each_package_init_is_its_face(package: str) -> None:
    """Each package lists its public names in ``__all__``; every one resolves (lazily loaded ones included)
    and none is also a module's name (the module would shadow it once loaded). docs/architecture.md names
    the face of each package and its internal modules."""
    module = importlib.import_module(f"polytox.{package}")
    names = module.__dict__.get("__all__")
    assert names is not None, f"polytox/{package.replace('.', '/')}/__init__.py has no __all__"
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    assert sorted(set(names) & submodules) == []
    for name in names:
        try:
            getattr(module, name)
        except ModuleNotFoundError as exc:  # an optional extra that is not installed: the name cannot load here
            assert not (exc.name or "polytox").startswith("polytox"), f"{package}.{name}: {exc}"
    doc = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"| `{package.replace('.', '/')}/` |" in doc, f"docs/architecture.md has no row for {package}"


def test_internal_packages_have_no_face_to_check() -> None:
    found = packages_with_a_face()
    assert {"corpus", "scoring", "scoring.ml", "integrations.lm_eval"} <= set(found)
    assert {"cli", "training"} <= set(found)  # an empty face: the package is internal, with its subpackages
    assert not {"training.scorer", "_util"} & set(found)
