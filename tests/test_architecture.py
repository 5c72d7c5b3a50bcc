"""The package's shape, as docs/architecture.md states it: no import cycle between modules, a small root,
and no study module (research/) inside the shipped package. import-linter's layer contracts run in
``make lint``; these checks cover what a layer contract cannot (cycles inside one package)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polytox

grimp = pytest.importorskip("grimp")

PACKAGE = Path(polytox.__file__).parent
CORE = {"__init__", "constants", "errors", "registry", "runner", "spec", "store", "types"}


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
    graph = grimp.build_graph("polytox")
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
