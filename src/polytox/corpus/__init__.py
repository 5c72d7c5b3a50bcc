"""Pretraining-corpus analysis (RTP §6, Appendix D; PTP Appendix A): score, stats, provenance, overlap.

One job per module:

- ``documents``: read a corpus (local JSONL / Parquet / CSV / ``.txt`` folders, or a streamed Hugging Face
  dataset) into ``CorpusDoc`` rows, giving bad input (empty, binary, unreadable, unknown language,
  missing URL) a defined status instead of an exception;
- ``domains``: URL -> registrable domain with the Public Suffix List (``publicsuffixlist``, offline);
- ``score``: stream a corpus through any registered scorer into resumable Parquet parts;
- ``ray``: the same scoring on Ray Data, and the band-partitioned overlap join;
- ``stats``: toxic shares with bootstrap CIs, the log-scale histogram, length / language / domain tables;
- ``render``: those statistics as Markdown and PNG;
- ``provenance``: join documents to user label tables (domain reliability, banned subreddits);
- ``overlap``: exact hashes, then MinHash LSH confirmed by exact Jaccard, between two corpora.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from .documents import CorpusDoc, iter_docs
    from .domains import domain_of
    from .overlap import OverlapIndex, build_index, exact_truth, query
    from .provenance import load_labels
    from .render import provenance_markdown, stats_markdown, stats_plots
    from .score import ScoreJob, run_score
    from .stats import compute_corpus_stats

__all__ = [
    "CorpusDoc",
    "OverlapIndex",
    "ScoreJob",
    "build_index",
    "compute_corpus_stats",
    "domain_of",
    "exact_truth",
    "iter_docs",
    "load_labels",
    "provenance_markdown",
    "query",
    "run_score",
    "stats_markdown",
    "stats_plots",
]

__getattr__ = lazy_getattr(
    __name__,
    {
        "CorpusDoc": ".documents",
        "iter_docs": ".documents",
        "domain_of": ".domains",
        "OverlapIndex": ".overlap",
        "build_index": ".overlap",
        "exact_truth": ".overlap",
        "query": ".overlap",
        "load_labels": ".provenance",
        "provenance_markdown": ".render",
        "stats_markdown": ".render",
        "stats_plots": ".render",
        "ScoreJob": ".score",
        "run_score": ".score",
        "compute_corpus_stats": ".stats",
    },
)
