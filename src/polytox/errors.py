"""Exceptions polytox raises for problems a user can fix; each message says what to do."""

from __future__ import annotations


class PolytoxError(Exception):
    """Base class: a problem with the user's input or environment, reported without a traceback."""


class SpecMismatchError(PolytoxError):
    """An output directory holds a run whose spec differs from the one asked for."""


class BadInputError(PolytoxError):
    """Input records that cannot be used; ``problems`` lists them as ``file:line: reason``."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class BadValueError(PolytoxError):
    """A setting has a value of the wrong type or out of range; ``key`` names the setting, so a caller that
    read it from a file can prefix the message with ``FILE:LINE``."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class UnsupportedLanguageError(PolytoxError):
    """A scorer was asked to score a language it does not support."""


class MissingDependencyError(PolytoxError):
    """An optional dependency is not installed; the message carries the pip command."""


def require(module: str, extra: str, package: str | None = None):  # type: ignore[no-untyped-def]
    """Import ``module`` or raise ``MissingDependencyError`` naming ``pip install 'polytox[extra]'``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"pip install 'polytox[{extra}]'" if extra else f"pip install {package or module}"
        raise MissingDependencyError(f"{module!r} is not installed ({exc}); install it with: {hint}") from exc
