"""polytox: measure neural toxic degeneration of language models (RealToxicityPrompts, PolygloToxicityPrompts).

Public API (docs/python.md)::

    import polytox

    result = polytox.evaluate(model="fake", prompts="demo", samples=2, out="runs/demo")
    result.metrics["overall"]["emt"]
    polytox.score(["you are wonderful"], scorer="fake")[0].value   # the scorer stays loaded for the next call
    with polytox.scorer("fake") as s: s.score(["more texts"])    # a handle that owns its scorer
    polytox.open_run("runs/demo").metrics(threshold=0.5)

Every problem the user can fix raises ``polytox.PolytoxError`` (or a subclass), with the message the
command line prints. The functions live in ``polytox.api`` and load on first use: ``import polytox`` stays
cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .errors import PolytoxError
from .spec import EvalSpec, GenerationSpec, MetricsSpec, PromptSpec, ScorerSpec, spec_from_flat
from .types import Generation, GenerationRequest, Prompt, Score

if TYPE_CHECKING:
    from .api import Run, ScoredText, ScorerHandle, close_scorers, evaluate, loaded_scorers, open_run, score, scorer
    from .store import RunStore

    RunResult = Run

__all__ = [
    "EvalSpec",
    "Generation",
    "GenerationRequest",
    "GenerationSpec",
    "MetricsSpec",
    "PolytoxError",
    "Prompt",
    "PromptSpec",
    "Run",
    "RunResult",
    "Score",
    "ScoredText",
    "ScorerHandle",
    "ScorerSpec",
    "close_scorers",
    "evaluate",
    "load_run",
    "loaded_scorers",
    "open_run",
    "score",
    "scorer",
    "spec_from_flat",
]

# Names resolved on first use (PEP 562), so that ``import polytox`` does not load the runner and its deps.
_LAZY = {
    "evaluate": "polytox.api",
    "score": "polytox.api",
    "open_run": "polytox.api",
    "Run": "polytox.api",
    "ScoredText": "polytox.api",
    "ScorerHandle": "polytox.api",
    "scorer": "polytox.api",
    "close_scorers": "polytox.api",
    "loaded_scorers": "polytox.api",
}
# Old names kept one release: each use warns (``DeprecationWarning``) and gives what to use now.
_DEPRECATED = {
    "RunResult": ("Run", "polytox.RunResult is deprecated: evaluate() returns a read-only Run"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _DEPRECATED:
        import warnings

        now, why = _DEPRECATED[name]
        warnings.warn(why, DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("polytox.api"), now)
    raise AttributeError(f"module 'polytox' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_run(path: str) -> RunStore:
    """Deprecated: ``polytox.open_run`` reads a run (``Run``), ``polytox.store.RunStore`` writes one.

    Opens an existing run directory as its ``RunStore`` (read and write), with a ``DeprecationWarning``.

    Args:
        path: the run directory.

    Returns:
        The run's ``RunStore``.

    Raises:
        PolytoxError: ``path`` is not a run directory.
    """
    import warnings

    from .store import RunStore

    warnings.warn(
        "polytox.load_run is deprecated: use polytox.open_run (read) or polytox.store.RunStore (write)",
        DeprecationWarning,
        stacklevel=2,
    )
    store = RunStore(path)
    store.manifest()
    return store
