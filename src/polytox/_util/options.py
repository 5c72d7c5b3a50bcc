"""Declared options of scorers, generators and detox methods, checked before any work and listed for users.

One mechanism for every component that takes ``KEY=VALUE`` options (``--scorer-opt``, ``--model-opt``,
``--detox NAME:k=v``): the component declares a mapping ``OPTIONS`` of name -> ``Option`` (a ``Field`` of
``_util.schema``, the schema class of every setting: its kind, range or choices, default and help), exactly
once, and ``check_options`` / ``typed_options`` / ``with_defaults`` read it; ``option_rows`` /
``format_options`` list it (``polytox scorers --options``). A number is range-checked as a flag is
(``_util.ranges``): by the range its ``Option`` declares, else a float must be finite. Only a plugin's factory
that declares no ``OPTIONS`` has its schema derived from its signature (each keyword parameter is an option;
its annotation says what it accepts: ``int``, ``float``, ``bool``, ``Literal[...]``, ``str``; a string default
such as ``"auto"`` is accepted beside a number; a number named in ``schema.COMMON_OPTIONS`` takes that range).
An unknown option names the valid ones; a wrong type or value names the option and what it accepts. Values
arrive as strings (flags) or YAML scalars; ``check_options`` checks them without converting them (a scorer
factory receives exactly the strings it was given), ``typed_options`` checks them and converts each to its
option's kind (a backend that keeps a dict of typed settings), and ``as_bool`` is the one reading of a boolean
word (``1/true/yes/on``, ``0/false/no/off``) for every scorer and backend.
"""

from __future__ import annotations

import ast
import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import BadValueError, PolytoxError
from .schema import FALSE_WORDS, TRUE_WORDS, Field

# Every option is a ``Field`` (``_util.schema``, the one schema class); ``Option`` is its name here.
Option = Field


def as_bool(value: Any, name: str = "") -> bool:
    """A boolean option value as a bool: ``1/true/yes/on`` -> True, ``0/false/no/off`` -> False.

    Args:
        value: a bool, or a word as a flag or a YAML scalar gives it (case and surrounding spaces ignored).
        name: the option's name, for the error message.

    Returns:
        The bool the word means.

    Raises:
        BadValueError: any other value, naming the option and the words it accepts.
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS or text in FALSE_WORDS:
        return text in TRUE_WORDS
    label = f"{name} " if name else ""
    raise BadValueError(f"option {label}takes true or false (1/yes/on, 0/no/off), got {value!r}", name)


def as_int(value: Any, name: str, minimum: int = 0) -> int | None:
    """An integer option as an int; None when not given (None or ``""``).

    Raises:
        BadValueError: not an integer, or below ``minimum``; the message names the option.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not Option("int").valid(value):
        raise BadValueError(f"scorer option {name} must be an integer, got {value!r}", name)
    number = int(float(value)) if isinstance(value, float) else int(str(value).strip())
    if number < minimum:
        raise BadValueError(f"scorer option {name} must be >= {minimum}, got {number}", name)
    return number


def convert(option: Option, value: Any) -> Any:
    """A value ``option`` accepted, as its kind: a bool, an int, a float or a string (a word allowed beside a
    number, such as ``auto``, stays a string)."""
    text = str(value).strip()
    if option.choices or option.kind == "str" or text in option.words:
        return value if isinstance(value, str) else text
    if option.kind == "bool":
        return as_bool(value)
    if option.kind == "int":
        return int(value) if isinstance(value, int | float) else int(text)
    return float(value) if isinstance(value, int | float) else float(text)


def option_from_annotation(annotation: Any, default: Any) -> Option:
    """An ``Option`` from a parameter's annotation (a string under ``from __future__ import annotations``)
    and default: ``str | int = "auto"`` -> an integer or 'auto'; ``Literal['a', 'b']`` -> one of them."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    if annotation is inspect.Parameter.empty:
        text = type(default).__name__ if default not in (None, inspect.Parameter.empty) else "str"
    parts = {p.strip() for p in text.split("|")}
    for part in parts:
        if part.startswith(("Literal[", "typing.Literal[")):
            inner = part[part.index("[") + 1 : part.rindex("]")]
            values = ast.literal_eval(f"({inner},)")
            return Option("str", choices=tuple(str(v) for v in values))
    words = (str(default),) if isinstance(default, str) and default != "" else ()
    for kind in ("bool", "int", "float"):  # the strictest kind named wins over plain str
        if kind in parts:
            return Option(kind, words=words if kind != "bool" else ())
    return Option("str")


def signature_schema(factory: Callable[..., Any]) -> tuple[dict[str, Option], bool]:
    """(options of ``factory``'s keyword parameters, whether it also takes ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}, True
    schema: dict[str, Option] = {}
    var_kw = False
    for name, p in params.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            var_kw = True
        elif name != "self" and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            schema[name] = option_from_annotation(p.annotation, p.default).ranged(name)
    return schema, var_kw


def check_options(owner: str, schema: Mapping[str, Option], given: Mapping[str, Any], flag: str = "option") -> None:
    """Refuse an option not in ``schema`` or a value the schema does not accept; the message names the
    option, what it accepts, and the valid options."""
    valid = sorted(schema)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        close = difflib.get_close_matches(unknown[0], valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listed = ", ".join(valid) if valid else "none"
        raise PolytoxError(f"{owner} has no {flag} {', '.join(repr(u) for u in unknown)}{hint}; its options: {listed}")
    for key, value in given.items():
        option = schema.get(key)
        if option is not None and not option.valid(value):
            if option.message:  # a refusal in the words users know (``Field.message``)
                raise BadValueError(option.message.format(key=key, value=value, choices=", ".join(option.choices)), key)
            raise BadValueError(f"{owner} {flag} {key}={value!r}: {key} takes {option.accepts()}", key)


def typed_options(
    owner: str, schema: Mapping[str, Option], given: Mapping[str, Any], flag: str = "option"
) -> dict[str, Any]:
    """``given`` checked against ``schema`` (``check_options``) and each value converted to its option's kind.

    Args:
        owner: who takes the options, for messages (``backend 'openai'``).
        schema: the options and what each accepts.
        given: option name -> value as given (a string from a flag, a YAML scalar).
        flag: the flag's name in messages (``--model-opt``).

    Returns:
        The given options only (no defaults), typed.
    """
    check_options(owner, schema, given, flag=flag)
    return {key: convert(schema[key], value) for key, value in given.items()}


def declared_options(component: Any) -> Mapping[str, Option] | None:
    """The ``OPTIONS`` a scorer, generator or detox class declares; None when it declares none."""
    options = getattr(component, "OPTIONS", None)
    return options if isinstance(options, Mapping) else None


def with_defaults(
    owner: str, schema: Mapping[str, Option], given: Mapping[str, Any], flag: str = "option"
) -> dict[str, Any]:
    """Every option of ``schema``: the given ones checked and typed (``typed_options``), the others at their
    declared default (None where the default is worked out at run time)."""
    typed = typed_options(owner, schema, given, flag=flag)
    return {key: typed.get(key, option.default) for key, option in schema.items()} | typed


def option_rows(schema: Mapping[str, Option]) -> list[tuple[str, str, str, str, str]]:
    """(name, kind, allowed values, default, help) of each option, in declaration order."""
    return [(name, o.kind, o.allowed(), _shown(o.default), o.help) for name, o in schema.items()]


def _shown(default: Any) -> str:
    """A default as a listing shows it: ``-`` for none (worked out at run time), ``""`` for the empty text."""
    if default is None:
        return "-"
    if isinstance(default, bool):
        return "true" if default else "false"
    return '""' if default == "" else str(default)


def format_options(title: str, schema: Mapping[str, Option] | None) -> str:
    """A plain-text table of ``schema`` under ``title`` (what ``polytox scorers --options`` prints)."""
    if schema is None:
        return f"{title}: takes any option (declares none)"
    if not schema:
        return f"{title}: no options"
    rows = [("option", "type", "allowed", "default", "help"), *option_rows(schema)]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [title]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        lines.append("  " + "  ".join([*cells, row[4]]))
    return "\n".join(line.rstrip() for line in lines)


def markdown_options(title: str, schema: Mapping[str, Option] | None) -> str:
    """``schema`` as a Markdown table under a ``###`` heading (the generated ``docs/options.md``)."""
    if schema is None:
        return f"### {title}\n\nTakes any option (declares none)."
    if not schema:
        return f"### {title}\n\nNo options."
    lines = [f"### {title}", "", "| option | type | allowed | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for name, kind, allowed, default, text in option_rows(schema):
        cells = [f"`{name}`", kind, f"`{allowed}`".replace("|", "\\|"), f"`{default}`", text.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
