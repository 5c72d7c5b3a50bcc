"""Assemble a report: the leaderboard, every analysis with its plot, per-run details and a browsable
sample of continuations, computed once and rendered to HTML, Markdown and JSON by the sibling modules.

An analysis that cannot run on the given runs (e.g. no run stores two scorers), or that fails, becomes a
section with its reason, not a failed report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..analysis import ANALYSES, AnalysisOptions, AnalysisResult, RunCollection, RunInfo, run_analysis
from ..analysis.leaderboard import Leaderboard, build_leaderboard
from ..analysis.samples import analyze as analyze_samples
from ..errors import MissingDependencyError, PolytoxError
from ..store.provenance import now


@dataclass
class Section:
    """One analysis in the report: its result and plot, or why it is absent."""

    name: str
    description: str
    result: AnalysisResult | None = None
    png: bytes | None = None
    error: str | None = None

    @property
    def anchor(self) -> str:
        return f"analysis-{self.name}"


@dataclass
class Report:
    title: str
    created_at: str
    version: str
    options: AnalysisOptions
    settings: dict[str, object]
    runs: list[RunInfo]
    leaderboard: Leaderboard
    sections: list[Section]
    samples: AnalysisResult
    notes: list[str] = field(default_factory=list)
    corpus: list[Any] = field(default_factory=list)  # report.corpus_section.CorpusSection, one per corpus


def _auto_compare(runs: Sequence[RunInfo]) -> tuple[str, str] | None:
    """Two scorers stored on the same continuations, if any run has them (its own scorer first)."""
    for r in runs:
        if len(r.scorer_ids) >= 2:
            first = r.default_scorer if r.default_scorer in r.scorer_ids else r.scorer_ids[0]
            second = next(s for s in r.scorer_ids if s != first)
            return first, second
    return None


def build_report(
    corpus: RunCollection,
    opts: AnalysisOptions,
    analyses: Sequence[str] | None = None,
    compare: tuple[str, str] | None = None,
    plots: bool = True,
    title: str = "polytox report",
) -> Report:
    """Compute everything a report shows; ``analyses`` defaults to all of ``ANALYSES``."""
    notes: list[str] = []
    sections: list[Section] = []
    for name in analyses or list(ANALYSES):
        section = Section(name=name, description=ANALYSES[name][1])
        run_opts = opts
        if name == "scorers":
            pair = compare or _auto_compare(corpus.runs)
            if pair is None:
                section.error = (
                    "no run stores two scorers on the same continuations; score a run with a "
                    "second scorer (e.g. a safety judge) to compare them"
                )
                sections.append(section)
                continue
            run_opts = dataclasses.replace(opts, scorer=pair[0], scorer_b=pair[1])
        try:
            section.result = run_analysis(name, corpus, run_opts)
        except PolytoxError as exc:
            section.error = str(exc)
        except Exception as exc:  # a bug in one analysis must not lose the rest of the report
            section.error = f"the analysis failed: {type(exc).__name__}: {exc}"
            notes.append(f"{name}: {section.error} (please report this)")
        if section.result is not None and plots:
            try:
                from .plots import plot_png

                section.png = plot_png(section.result)
            except MissingDependencyError as exc:
                plots = False
                notes.append(f"plots left out: {exc}")
        sections.append(section)
    board = build_leaderboard(corpus, opts)
    samples = analyze_samples(corpus, opts)
    settings: dict[str, object] = {
        "threshold": corpus.metrics.threshold,
        "comparison": corpus.metrics.comparison,
        "scorer": opts.scorer or "each run's own",
        "attribute": opts.attribute,
        "filters": opts.describe() or "none",
    }
    return Report(
        title=title,
        created_at=now(),
        version=__version__,
        options=opts,
        settings=settings,
        runs=list(corpus.runs),
        leaderboard=board,
        sections=sections,
        samples=samples,
        notes=notes,
    )
