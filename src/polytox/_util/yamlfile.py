"""Read a YAML mapping from a user's file; every way it can be wrong is one ``PolytoxError`` naming the file.

A missing file, one that cannot be read (a folder, no permission, not UTF-8), invalid YAML (with its line and
column), a key given twice in one mapping (PyYAML would keep the last silently) and a document that is not a
mapping each give one message. The line of every top-level key is kept,
so a later check (an unknown key, a bad value) can point at ``FILE:LINE`` as the prompt readers do.

The document is composed with limits, because a few bytes of YAML can otherwise hang or crash the reader:
an alias that refers to its own anchor (``model_opt: &r [*r]``, a cycle every walk of the data follows
forever), nesting deeper than ``MAX_DEPTH`` (PyYAML composes recursively: 500 levels is a
``RecursionError``), more than ``MAX_ALIASES`` aliases, or aliases that expand to more than ``MAX_NODES``
nodes (the "billion laughs": each alias doubling the one before). Each is an invalid-YAML line at its place.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from .jsondepth import MAX_DEPTH

MAX_ALIASES = 100  # far beyond any config (aliases are rare in one); far below a size-doubling chain's reach
MAX_NODES = 100_000  # nodes of the document with every alias expanded: a config holds a few dozen


@dataclass
class YamlMapping:
    """A YAML file's top-level mapping and the 1-based line of each of its keys."""

    path: str
    data: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, key: str) -> str:
        """``FILE:LINE`` of ``key`` (just ``FILE`` when the key is not in the file)."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else self.path

    def check_keys(self, known: Iterable[str], what: str = "config key") -> None:
        """Refuse the first key not in ``known``, at its line, with a close match and the known keys."""
        allowed = sorted(set(known))
        for key in self.data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise PolytoxError(f"{self.where(key)}: unknown {what} {key!r}{hint}; known: {', '.join(allowed)}")


def yaml_error(path: str | Path, exc: Exception) -> str:
    """PyYAML's multi-line error as one line: ``FILE:LINE:COL: invalid YAML: problem (context)``."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    reason = f"{problem} ({context})" if context else problem
    return f"{where}: invalid YAML: {reason}"


def _limited_loader(text: str) -> Any:
    """A ``SafeLoader`` over ``text`` whose composer refuses self-referring aliases, deep nesting and too many
    aliases (a ``ComposerError`` at the place, so ``yaml_error`` words it as any other invalid YAML)."""
    import yaml
    from yaml.composer import ComposerError

    class Loader(yaml.SafeLoader):
        depth = 0
        aliases = 0
        open_anchors: list[str | None]

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            mark: Any = event.start_mark
            if isinstance(event, yaml.AliasEvent):
                self.aliases += 1
                if event.anchor in self.open_anchors:
                    raise ComposerError(None, None, f"alias *{event.anchor} refers to its own anchor", mark)
                if self.aliases > MAX_ALIASES:
                    raise ComposerError(None, None, f"more than {MAX_ALIASES} aliases", mark)
                return super().compose_node(parent, index)
            self.depth += 0 if isinstance(event, yaml.ScalarEvent) else 1  # levels of lists and mappings
            if self.depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            self.open_anchors.append(getattr(event, "anchor", None))
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 0 if isinstance(event, yaml.ScalarEvent) else 1
                self.open_anchors.pop()

    loader = Loader(text)
    loader.open_anchors = []
    return loader


def expanded_size(node: Any, limit: int = MAX_NODES) -> int:
    """How many nodes the composed document holds with every alias expanded (each shared node counted once
    per reference, as a reader walking the data meets it), counted up to just past ``limit``."""
    import yaml

    sizes: dict[int, int] = {}
    order: list[Any] = []
    stack = [node] if node is not None else []
    while stack:  # children before parents, each node once (the graph has no cycle: the composer refused them)
        current = stack.pop()
        if id(current) in sizes:
            continue
        sizes[id(current)] = 0
        order.append(current)
        if isinstance(current, yaml.MappingNode):
            stack.extend(n for pair in current.value for n in pair)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    for current in reversed(order):
        children = (
            [n for pair in current.value for n in pair]
            if isinstance(current, yaml.MappingNode)
            else current.value
            if isinstance(current, yaml.SequenceNode)
            else []
        )
        sizes[id(current)] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
    return sizes[id(node)] if node is not None else 0


def load_limited(text: str) -> tuple[Any, Any]:
    """(the composed node, the constructed data) of one YAML document, within the limits of this module;
    a ``yaml.YAMLError`` otherwise."""
    from yaml.composer import ComposerError

    loader = _limited_loader(text)
    try:
        node = loader.get_single_node()
        if node is not None and expanded_size(node) > MAX_NODES:
            raise ComposerError(None, None, f"aliases expand to more than {MAX_NODES} nodes", node.start_mark)
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def first_duplicate_key(node: Any) -> tuple[str, int, int] | None:
    """(key, its line, the line of its first occurrence) of the first key repeated in any mapping of a
    composed YAML document (PyYAML keeps the last value silently), or None. Each node is visited once, so a
    node shared by aliases costs one visit."""
    import yaml

    stack = [node] if node is not None else []
    seen_nodes: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen_nodes:
            continue
        seen_nodes.add(id(current))
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in current.value:
                key, line = str(key_node.value), key_node.start_mark.line + 1
                if isinstance(key_node, yaml.ScalarNode) and key in seen:
                    return key, line, seen[key]
                seen.setdefault(key, line)
                stack.append(value_node)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    return None


def read_yaml_mapping(path: str | Path, what: str = "config") -> YamlMapping:
    """The top-level mapping of the YAML file at ``path`` (empty file -> empty mapping); keys as strings."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise PolytoxError(f"{what} file {p} does not exist")
    if p.is_dir():
        raise PolytoxError(f"{what} file {p} is a folder, not a YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise PolytoxError(f"{p}: cannot read the {what} file: {reason}") from None
    except OSError as exc:
        raise PolytoxError(f"{p}: cannot read the {what} file: {exc.strerror or exc}") from None
    try:
        node, data = load_limited(text)
    except yaml.YAMLError as exc:
        raise PolytoxError(yaml_error(p, exc)) from None
    duplicate = first_duplicate_key(node)
    if duplicate is not None:
        key, line, before = duplicate
        raise PolytoxError(f"{p}:{line}: duplicate key {key!r} (first at line {before}); keep one")
    if data is None:
        return YamlMapping(str(p), {})
    if not isinstance(data, Mapping):
        raise PolytoxError(f"{p}: a {what} must be a mapping of keys to values, got a YAML {type(data).__name__}")
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            lines[str(key_node.value)] = key_node.start_mark.line + 1  # the last one wins, as in the data
    return YamlMapping(str(p), {str(k): v for k, v in data.items()}, lines)
