"""Cross-run analyses: the leaderboard and the papers' research questions, read from run directories.

Each analysis is a module with ``analyze(collection, options) -> AnalysisResult``; ``ANALYSES`` maps the
names ``polytox analyze`` accepts to them, in report order. Importing this package is cheap (the CLI
builds its parser from ``ANALYSES``); DuckDB and friends load with the first real use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from collections.abc import Callable

    from .options import AnalysisOptions
    from .result import AnalysisResult
    from .run_collection import RunCollection

ANALYSES: dict[str, tuple[str, str]] = {
    # name: (module, one-line description)
    "language": (
        "polytox.analysis.language",
        "AT per language per model and by resource tier (PTP Fig. 3, Tab. 2)",
    ),
    "size": (
        "polytox.analysis.size",
        "AT vs parameter count within a family, Cohen's d + Welch t (PTP Fig. 4)",
    ),
    "category": (
        "polytox.analysis.category",
        "base vs instruct vs preference, alignment methods (PTP Fig. 6-7)",
    ),
    "prompt-toxicity": (
        "polytox.analysis.prompt_toxicity",
        "Pearson r prompt vs continuation toxicity (PTP §4.5)",
    ),
    "scorers": (
        "polytox.analysis.scorer_agreement",
        "two scorers on the same continuations (PTP §4.4, Tab. 5)",
    ),
    "challenging": ("polytox.analysis.challenging", "prompts toxic for every model (RTP §5.3)"),
    "sources": ("polytox.analysis.sources", "the same model over several prompt sets (PTP Fig. 9)"),
    "emt-k": ("polytox.analysis.emt_k", "EMT and EP vs K continuations per prompt"),
}

_LAZY = {
    "RunCollection": "polytox.analysis.run_collection",
    "AnalysisOptions": "polytox.analysis.options",
    "AnalysisResult": "polytox.analysis.result",
    "Table": "polytox.analysis.result",
    "RunInfo": "polytox.analysis.runs",
    "load_runs": "polytox.analysis.runs",
    "load_meta_file": "polytox.analysis.runs",
}

__getattr__ = lazy_getattr(__name__, _LAZY, deprecated={"Corpus": "RunCollection"})


def analysis_function(name: str) -> Callable[[RunCollection, AnalysisOptions], AnalysisResult]:
    """The ``analyze`` function of a named analysis."""
    module, _ = ANALYSES[name]
    fn: Callable[[RunCollection, AnalysisOptions], AnalysisResult] = importlib.import_module(module).analyze
    return fn


def run_analysis(name: str, collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    return analysis_function(name)(collection, opts)


__all__ = [
    "ANALYSES",
    "AnalysisOptions",
    "AnalysisResult",
    "RunCollection",
    "RunInfo",
    "Table",
    "analysis_function",
    "load_meta_file",
    "load_runs",
    "run_analysis",
]
