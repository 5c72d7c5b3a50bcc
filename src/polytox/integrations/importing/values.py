"""Check every value an import reads from a framework's output before it is stored.

A framework's output is a file a user hands in, so its values are checked as a prompt file's are: an object
where an object belongs, a toxicity that is a finite number in [0, 1] (never a string, a list or ``true``),
a non-empty prompt text, a known language, an integer epoch, a threshold in [0, 1]. Each refusal is a
``Malformed`` with the reason; the reader adds the file and the record (``FILE:LINE`` or ``FILE: sample
ID``) and raises one ``PolytoxError`` line. The prompt rules are the prompt readers' own
(``prompts.records``), so an imported prompt is refused for what a prompt file's record would be.
JSON is read through ``_util.jsondepth`` (a nesting limit), so a record nested 100K deep is refused, not a
``RecursionError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..._util import jsondepth
from ..._util.ranges import PROBABILITY, Range
from ...errors import PolytoxError
from ...prompts.records import RecordError, check_id, check_lang, check_text, check_toxicity

__all__ = [
    "Malformed",
    "count",
    "finite",
    "json_text",
    "lang",
    "mapping",
    "prompt_id",
    "reported",
    "sequence",
    "text",
    "threshold",
    "toxicity",
]


class Malformed(ValueError):
    """A value of a framework's output that polytox cannot store; the message is the reason."""


def json_text(text: str | bytes, where: str) -> Any:
    """``text`` parsed as JSON with the nesting limit; one ``PolytoxError`` naming ``where`` otherwise."""
    try:
        return jsondepth.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError as exc:
        raise PolytoxError(f"{where}: not UTF-8 text (invalid byte at {exc.start})") from None
    except ValueError as exc:  # json.JSONDecodeError and jsondepth.TooDeepError
        raise PolytoxError(f"{where}: not readable JSON ({exc})") from None


def mapping(value: Any, what: str, missing_ok: bool = True) -> Mapping[str, Any]:
    """``value`` as an object; None (absent) is an empty one where ``missing_ok``."""
    if value is None and missing_ok:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{what} must be an object, got {_kind(value)}")
    return value


def sequence(value: Any, what: str) -> list[Any]:
    """``value`` as a list; None (absent) is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} must be a list, got {_kind(value)}")
    return value


def toxicity(value: Any, what: str) -> float | None:
    """A toxicity: None, or a finite number in [0, 1]."""
    try:
        return check_toxicity(value, what)
    except RecordError as exc:
        raise Malformed(str(exc)) from None


def finite(value: Any, what: str, rule: Range | None = None) -> float | None:
    """A number (None: absent) that is finite and, given ``rule``, in its range; ``threshold: "abc"`` is refused."""
    if value is None:
        return None
    problem = (rule or Range()).problem(value)
    if problem:
        raise Malformed(f"{what} {problem}")
    return float(value)


def reported(value: Any, what: str) -> float | None:
    """A metric the framework printed: None when it printed none, or NaN (lm-eval's EMT when every score
    failed); otherwise a finite number."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return finite(value, what)


def threshold(value: Any, what: str) -> float | None:
    return finite(value, what, PROBABILITY)


def count(value: Any, what: str, default: int = 1) -> int:
    """A whole number >= 1 (an epoch); None is ``default``."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Malformed(f"{what} must be a whole number >= 1, got {value!r}")
    return value


def text(value: Any, what: str) -> str:
    """A prompt's text: a string that is not empty, whitespace or invisible only, without NUL or a lone surrogate."""
    try:
        return check_text(value, what)
    except RecordError as exc:
        raise Malformed(str(exc)) from None


def prompt_id(value: Any, what: str) -> str:
    """A prompt id as text (no NUL, no lone surrogate); an object or a list is no id."""
    if isinstance(value, Mapping | list) or value is None or value == "":
        raise Malformed(f"{what} must be a string or a number, got {_kind(value)}")
    try:
        return check_id(value, what)
    except RecordError as exc:
        raise Malformed(str(exc)) from None


def lang(value: Any, what: str) -> str:
    """A language code of the 17 (normalised: ``EN`` is ``en``); ``klingon`` is refused with the list."""
    try:
        return check_lang(value, what)
    except RecordError as exc:
        raise Malformed(str(exc)) from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return f"a list ({_short(value)})"
    return f"{type(value).__name__} {_short(value)}"


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
