"""``polytox.evaluate``: ``polytox eval`` as a function, one keyword per row of the settings table.

The keywords, their types and the docstring are made from ``polytox.settings.TABLE`` (for type checkers:
``api.keywords.EvaluateSettings``, which a test keeps equal to the table) (``signature`` and
``docstring`` below; ``help(polytox.evaluate)`` shows them), and the settings are resolved by the code the
command uses (``api.resolve.resolve_run``): a config file, ``retry_failed`` without settings (the stored
spec) and ``generations_from`` (the source run's spec) behave as there, and a bad value is the same error.
An ``EvalSpec`` is still accepted in place of the keywords.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Unpack

from .. import settings as S
from ..errors import PolytoxError
from ..executors import ExecutorConfig
from ..spec import EvalSpec
from .keywords import EvaluateSettings
from .resolve import resolve_run, with_spec
from .run import Run

# the keywords that are not settings of the table, with their annotation and default (``signature``)
EXTRA = {
    "config": ("str | Path | None", None),
    "executor": ("str | ExecutorConfig | None", None),
    "retry_failed": ("bool", False),
    "generations_from": ("str | Path | None", None),
    "progress": ("Callable[[str, int, int], None] | None", None),
}
EXTRA_HELP = {
    "config": "a YAML file of the same keys; keywords override it (``--config``).",
    "executor": "``'pipelined'``, ``'serial'`` or ``'ray'``, or an ``ExecutorConfig`` (``--executor``).",
    "retry_failed": "regenerate the failed samples of ``out`` with their original seeds (``--retry-failed``).",
    "generations_from": "score this run's stored generations instead of generating (``--generations-from``).",
    "progress": "called as ``progress(stage, done, total)`` while the run works.",
}


def keywords() -> list[S.Setting]:
    """The settings that are keywords of ``evaluate`` (``executor`` is one of ``EXTRA``: it also takes an
    ``ExecutorConfig``; the command's keys are not: ``out`` is an argument, the others the command's own)."""
    return [s for s in S.TABLE if s.flag and s.key not in EXTRA and s.section != "command"]


def _check_keys(options: Mapping[str, Any]) -> None:
    """Refuse a keyword that is not a setting, naming the closest one."""
    known = sorted(S.CONFIG_KEYS - S.COMMAND_KEYS)
    unknown = sorted(set(options) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PolytoxError(f"evaluate() has no option {unknown[0]!r}{hint}; its options: {', '.join(known)}")


def evaluate(
    spec: EvalSpec | None = None,
    out: str | Path | None = None,
    *,
    config: str | Path | None = None,
    executor: str | ExecutorConfig | None = None,
    retry_failed: bool = False,
    generations_from: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    **settings: Unpack[EvaluateSettings],
) -> Run:
    # the docstring and the signature ``help()`` shows are made from the settings table (below)
    from ..runner import execute_run

    if spec is not None and not isinstance(spec, EvalSpec):
        raise PolytoxError(
            f"evaluate() takes an EvalSpec or keyword options, got {type(spec).__name__} {spec!r} "
            "as the spec; give the run directory as out=..."
        )
    _check_keys(settings)
    given: dict[str, Any] = {k: v for k, v in settings.items() if v is not None}
    chosen = executor if isinstance(executor, ExecutorConfig) else None
    if chosen is None and executor is not None:
        given["executor"] = executor
    if spec is not None:
        if config is not None:
            raise PolytoxError("evaluate() takes a spec or keyword options (and config), not both")
        resolved = with_spec(spec, given, out, retry_failed)
    else:
        resolved = resolve_run(
            given, config=config, out=out, retry_failed=retry_failed or None, generations_from=generations_from
        )
    report = execute_run(
        resolved.spec,
        resolved.out,
        progress=progress,
        executor=chosen or resolved.executor,
        retry_failed=retry_failed,
        generations_from=str(generations_from) if generations_from is not None else None,
    )
    return Run(report.path, report)


def signature() -> inspect.Signature:
    """``evaluate``'s signature as ``help()`` shows it: ``spec``, ``out``, then one keyword per setting."""
    P = inspect.Parameter
    params = [
        P("spec", P.POSITIONAL_OR_KEYWORD, default=None, annotation="EvalSpec | None"),
        P("out", P.POSITIONAL_OR_KEYWORD, default=None, annotation="str | Path | None"),
    ]
    params += [P(s.key, P.KEYWORD_ONLY, default=None, annotation=s.annotation()) for s in keywords()]
    params += [P(name, P.KEYWORD_ONLY, default=d, annotation=a) for name, (a, d) in EXTRA.items()]
    return inspect.Signature(params, return_annotation="Run")


def signature_text(width: int = 100) -> str:
    """The signature as docs/python.md shows it: ``polytox.evaluate(`` then the parameters, wrapped."""
    parts, star = [], False
    for p in signature().parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(f"{p.name}: {p.annotation} = {p.default!r}")
    lines, line = ["polytox.evaluate("], "   "
    for i, part in enumerate(parts):
        piece = f" {part}" + ("," if i < len(parts) - 1 else "")
        if len(line) + len(piece) > width:
            lines.append(line)
            line = "   "
        line += piece
    lines += [line, ") -> Run"]
    return "\n".join(lines)


def docstring() -> str:
    """``evaluate``'s docstring: one ``Args`` line per setting, from its help in the table."""
    lines = [
        "Run or resume an evaluation (``polytox eval``): generate K continuations per prompt, score them,",
        "compute the metrics; rerunning with the same ``out`` resumes. Every keyword is a setting of",
        "docs/settings.md (None: not given, the default or the config's value applies).",
        "",
        "Args:",
        "    spec: a complete ``EvalSpec`` instead of the settings (not both).",
        "    out: the run directory (``--out``); required.",
    ]
    lines += [f"    {s.key}: {s.help} (``{s.option}``)." for s in keywords()]
    lines += [f"    {name}: {text}" for name, text in EXTRA_HELP.items()]
    lines += [
        "",
        "Returns:",
        "    The run, read-only (``Run``): ``.metrics`` (what ``polytox eval --json`` prints; call it to",
        "    recompute with other settings), ``.path``, ``.spec``, ``.failures``, ``.resumed``.",
        "",
        "Raises:",
        "    PolytoxError: a bad argument or input, with the message ``polytox eval`` prints.",
    ]
    return "\n".join(lines)


evaluate.__signature__ = signature()  # type: ignore[attr-defined]
evaluate.__doc__ = docstring()
