"""JSON parsing with a nesting limit: a record nested 200,000 deep is a bad record, not a ``RecursionError``.

Python's JSON decoder recurses once per level, so deep enough nesting exhausts the interpreter's stack.
``loads`` refuses a text nested deeper than ``MAX_DEPTH`` with ``TooDeepError`` (a ``ValueError``, as a
malformed text is) before decoding it. The depth is measured only when the text holds more brackets than
the limit (``str.count`` is cheap), and then by a regular expression that skips strings, so ordinary
records pay nothing noticeable.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 100  # far beyond any prompt record or API request; far below Python's recursion limit

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class TooDeepError(ValueError):
    """A JSON text nested deeper than the limit."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise ``TooDeepError`` when ``text`` nests deeper than ``limit``."""
    if text.count("[") + text.count("{") > limit and nesting_depth(text) > limit:
        raise TooDeepError(f"nested deeper than {limit} levels")


def loads(text: str, limit: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads`` (``kwargs`` passed on) that refuses nesting deeper than ``limit`` (``TooDeepError``, a
    ``ValueError``)."""
    check_depth(text, limit)
    return json.loads(text, **kwargs)
