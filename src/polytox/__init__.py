"""polytox: measure neural toxic degeneration of language models (RealToxicityPrompts, PolygloToxicityPrompts).

Public API::

    from polytox import EvalSpec, evaluate, load_run
    result = evaluate(EvalSpec(), "runs/demo")     # the embedded defaults
    result.metrics["overall"]["emt"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from .spec import EvalSpec, GenerationSpec, MetricsSpec, PromptSpec, ScorerSpec, spec_from_flat
from .types import Generation, GenerationRequest, Prompt, Score

if TYPE_CHECKING:
    from .runner import RunResult
    from .store import RunStore

__all__ = ["EvalSpec", "Generation", "GenerationRequest", "GenerationSpec", "MetricsSpec", "Prompt",
           "PromptSpec", "Score", "ScorerSpec", "evaluate", "load_run", "spec_from_flat"]


def evaluate(spec: EvalSpec, out: str, **kwargs: Any) -> RunResult:
    """Run or resume an evaluation; see ``polytox.runner.evaluate``."""
    from .runner import evaluate as _evaluate

    return _evaluate(spec, out, **kwargs)


def load_run(path: str) -> RunStore:
    """Open an existing run directory."""
    from .store import RunStore

    store = RunStore(path)
    store.manifest()
    return store
