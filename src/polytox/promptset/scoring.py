"""Scoring documents with any registered polytox scorer, through the persistent score cache.

Each text is cut to 20,480 UTF-8 bytes on a character boundary before scoring, as PTP did before calling
Perspective (Appendix A; ``polytox._util.textutil.truncate_utf8``). Scores go through ``build_scorer``'s cache,
so a rerun after a kill scores nothing twice. A document whose score failed is rejected with the
scorer's error (``SCORE_FAILED``), never given a made-up value; transient failures (timeouts, quota,
crashes) are counted so the shard is redone on the next run, when they are retried.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from .._util.textutil import truncate_utf8
from ..constants import PERSPECTIVE_MAX_BYTES
from ..errors import PolytoxError
from ..scoring import Scorer, build_scorer
from ..types import Score
from .document import Document, Rejected
from .pipeline import Step, StepContext

TOXICITY = "toxicity"


def open_scorer(name: str, options: Mapping[str, str]) -> Scorer:
    """Build a scorer (cached) and check it reports ``toxicity``, which the bins are made of."""
    scorer = build_scorer(name, options)
    if TOXICITY not in scorer.attributes:
        raise PolytoxError(
            f"scorer {scorer.id!r} has no 'toxicity' attribute (it has: "
            f"{', '.join(scorer.attributes)}); the toxicity bins need one"
        )
    return scorer


def score_texts(
    scorer: Scorer, texts: Sequence[str], langs: Sequence[str], max_bytes: int = PERSPECTIVE_MAX_BYTES
) -> tuple[list[Score], list[bool]]:
    """Scores of the texts cut to ``max_bytes``, and whether each one was cut."""
    cut = [truncate_utf8(t, max_bytes) for t in texts]
    return scorer.score(cut, list(langs)), [c is not t for c, t in zip(cut, texts, strict=True)]


class ScoreDocuments(Step):
    """Attach the scorer's values to each document (batched); reject the ones whose score failed."""

    name: ClassVar[str] = "score"

    def __init__(
        self,
        scorer: str,
        options: Mapping[str, str] | None = None,
        batch_size: int = 64,
        max_bytes: int = PERSPECTIVE_MAX_BYTES,
    ) -> None:
        self.scorer_name = scorer
        self.options = dict(options or {})
        self.batch_size = batch_size
        self.max_bytes = max_bytes
        self._scorer: Scorer | None = None

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            self._scorer = open_scorer(self.scorer_name, self.options)
        return self._scorer

    def __getstate__(self) -> dict[str, Any]:  # picklable for parallel runners: the scorer is rebuilt
        state = dict(self.__dict__)
        state["_scorer"] = None
        return state

    def _flush(self, batch: list[Document], ctx: StepContext) -> Iterator[Document]:
        scores, truncated = score_texts(self.scorer, [d.text for d in batch], [d.lang for d in batch], self.max_bytes)
        for doc, score, cut in zip(batch, scores, truncated, strict=True):
            if cut:
                ctx.count(self.name, "truncated")
            value = score.get(TOXICITY)
            if score.ok and value is not None:
                yield dataclasses.replace(
                    doc, toxicity=float(value), scores=dict(score.values or {}), scorer=self.scorer.id, truncated=cut
                )
                continue
            if score.transient:
                ctx.transient_failures += 1
                ctx.count(self.name, "transient_failures")
            error = score.error or "no toxicity value"
            ctx.reject(
                Rejected.of(self.name, f"SCORE_FAILED: {error}", doc, transient=score.transient, scorer=self.scorer.id)
            )

    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        batch: list[Document] = []
        for doc in docs:
            batch.append(doc)
            if len(batch) >= self.batch_size:
                yield from self._flush(batch, ctx)
                batch = []
        if batch:
            yield from self._flush(batch, ctx)

    def describe(self) -> dict[str, Any]:
        return {"step": self.name, "scorer": self.scorer.describe(), "max_bytes": self.max_bytes}

    def close(self) -> None:
        if self._scorer is not None:
            self._scorer.close()
            self._scorer = None
