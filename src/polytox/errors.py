"""Exceptions polytox raises for problems a user can fix; each message says what to do."""

from __future__ import annotations


class PolytoxError(Exception):
    """Base class: a problem with the user's input or environment, reported without a traceback."""


class SpecMismatchError(PolytoxError):
    """An output directory holds a run whose spec differs from the one asked for."""


class DamagedRunError(PolytoxError):
    """A stored file of a run (a manifest, a part) is empty, cut short or not what it should be; ``path``
    names it. Writers repair what they can on resume; readers report it in one line."""

    def __init__(self, message: str, path: object = None) -> None:
        super().__init__(message)
        self.path = path


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


class FatalGenerationError(PolytoxError):
    """The generation backend cannot go on (its engine died, the model failed to load, the server has been
    unreachable for longer than the retry budget): every further request would fail the same way.

    A backend raises it instead of recording per-sample errors; executors stop scheduling shards on it,
    keep what is already stored, and the run ends as stopped (``RunStoppedError``). Failures of single
    requests (one timeout, one 5xx, one prompt the engine rejects) stay per-sample errors: data.
    """


class RunStoppedError(PolytoxError):
    """A run stopped before its end because generation failed fatally; finished shards are stored and the
    message names the cause and the command that resumes the run."""


# Exit codes of the ``polytox`` command (documented in docs/cli.md).
EXIT_OK = 0
EXIT_USAGE = 2  # bad input or arguments: one ``polytox: error: ...`` line
EXIT_TOO_MANY_FAILED = 3  # the run completed, but more samples failed than ``--max-failed`` allows
EXIT_STOPPED = 4  # the run stopped early: generation failed fatally (engine dead, server gone)
EXIT_INTERRUPTED = 130  # Ctrl-C
