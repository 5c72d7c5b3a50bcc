"""Prompt-set construction: turn a web-text corpus into an RTP- or PTP-style prompt set (``polytox build``).

The pipeline is a list of small steps over an iterator of documents (``pipeline.Step``); ``builder.build``
runs them in resumable stages. ``stats.compute_stats`` gives the statistics of a built set.
"""

from __future__ import annotations

from .builder import BuildResult, build
from .document import Document, Rejected
from .pipeline import Step, StepContext, compose
from .readers import CorpusSource, FieldMap
from .spec import BuildSpec, TranslateSpec

__all__ = [
    "BuildResult",
    "BuildSpec",
    "CorpusSource",
    "Document",
    "FieldMap",
    "Rejected",
    "Step",
    "StepContext",
    "TranslateSpec",
    "build",
    "compose",
]
