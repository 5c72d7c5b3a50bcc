"""The Python API: what ``polytox eval``, ``polytox score`` and ``polytox metrics`` do, as functions.

``evaluate`` runs (or resumes) an evaluation and returns it as a read-only ``Run``; ``score`` scores a list of texts
with a scorer it keeps loaded between calls (``close_scorers`` releases them), ``scorer`` gives a handle
that owns one; ``open_run`` reads a run directory. Each builds its work with the same code as the command it mirrors, so
a call and the command give the same numbers, and a bad argument raises ``PolytoxError`` with the one line
the command prints after ``polytox: error:``. The package root (``polytox``) re-exports these names
lazily; examples: docs/python.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import PolytoxError
from .evaluation import evaluate
from .handle import ScorerHandle, scorer
from .run import Run, open_run
from .scorers import close_scorers, loaded_scorers
from .texts import ScoredText, score

__all__ = [
    "PolytoxError",
    "Run",
    "ScoredText",
    "ScorerHandle",
    "close_scorers",
    "evaluate",
    "loaded_scorers",
    "open_run",
    "score",
    "scorer",
]


def __getattr__(name: str) -> Any:
    """``RunResult``: what ``evaluate`` returned before it returned a ``Run``; kept one release, with a
    ``DeprecationWarning``."""
    if name == "RunResult":
        import warnings

        warnings.warn("polytox.api.RunResult is deprecated; evaluate() returns a Run", DeprecationWarning, stacklevel=2)
        return Run
    raise AttributeError(f"module 'polytox.api' has no attribute {name!r}")
