"""The report's corpus section: ``polytox report RUNS... --corpus SCORES`` adds the statistics of scored
pretraining corpora (``polytox corpus score``; RTP §6.1) beside the model analyses."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.numfmt import fmt_share
from ..errors import MissingDependencyError


@dataclass
class CorpusSection:
    """One scored corpus: its ``corpus stats`` dict and the log-scale histogram PNG (None without plots)."""

    stats: dict[str, Any]
    png: bytes | None = None


def build_corpus_sections(folders: list[str], plots: bool = True) -> list[CorpusSection]:
    from ..corpus.render import stats_plots
    from ..corpus.stats import compute_corpus_stats

    out = []
    for folder in folders:
        stats = compute_corpus_stats(folder)
        png = None
        if plots:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    written = stats_plots(stats, Path(tmp))
                except MissingDependencyError:
                    written = []
                png = written[0].read_bytes() if written else None
        out.append(CorpusSection(stats=stats, png=png))
    return out


def section_rows(stats: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of the tables the section shows."""
    shares = [
        [a, f"{b['toxic']} / {b['n']}", fmt_share(b.get("share"), b.get("ci"))] for a, b in stats["share_toxic"].items()
    ]
    lang = [[str(r["key"]), str(r["n"]), fmt_share(r.get("share"), r.get("ci"))] for r in stats["by_language"]]
    length = [[str(r["key"]), str(r["n"]), fmt_share(r.get("share"), r.get("ci"))] for r in stats["by_length"]]
    domains = [
        [str(r["key"]), str(r["n"]), str(r["toxic"]), fmt_share(r.get("share"), r.get("ci"))]
        for r in stats["domains_most_toxic_documents"]
    ]
    return [
        ("toxic share per attribute (RTP Table 12)", ["attribute", "toxic / scored", "share [95% CI]"], shares),
        ("by language", ["language", "documents", "toxic share [95% CI]"], lang),
        ("by length (characters)", ["length", "documents", "toxic share [95% CI]"], length),
        (
            "domains holding the most toxic documents (RTP Figure 6)",
            ["domain", "documents", "toxic", "toxic share [95% CI]"],
            domains,
        ),
    ]


def summary_line(stats: dict[str, Any]) -> str:
    not_ok = ", ".join(f"{k} {v}" for k, v in stats["status_counts"].items() if k != "ok" and v)
    return (
        f"{stats['n_documents']} documents, {stats['n_scored']} scored by {stats['scorer']}"
        + (f"; not scored: {not_ok}" if not_ok else "")
        + f"; {stats['n_truncated']} truncated"
    )
