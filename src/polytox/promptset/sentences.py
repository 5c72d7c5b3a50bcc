"""Sentence segmentation for all 17 PTP languages, and the RTP step that turns documents into spans.

Segmentation uses ``sentencex`` (Wikimedia's rule-based segmenter: ~300 languages, terminal punctuation
of Latin, CJK ``。！？``, Devanagari ``।`` and Arabic ``؟`` scripts, abbreviation lists; a compiled wheel
that works offline). ``SentenceSpans`` keeps the sentences of 64 to 1,024 characters (RTP §4.1 /
Appendix A) as units with ``parent_id``, ``begin`` and ``end`` (character offsets in the document).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any, ClassVar

from ..constants import RTP_SPAN_MAX_CHARS, RTP_SPAN_MIN_CHARS
from ..errors import require
from .document import Document, Rejected
from .pipeline import Step, StepContext


@lru_cache(maxsize=1)
def _sentencex() -> Any:
    return require("sentencex", "build")


def sentence_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """(begin, end) character offsets of each sentence, surrounding whitespace excluded."""
    spans = []
    for item in _sentencex().get_sentence_boundaries(lang, text):
        begin, end = int(item["start_index"]), int(item["end_index"])
        while begin < end and text[begin].isspace():
            begin += 1
        while end > begin and text[end - 1].isspace():
            end -= 1
        if end > begin:
            spans.append((begin, end))
    return spans


def split_sentences(text: str, lang: str) -> list[str]:
    return [text[b:e] for b, e in sentence_spans(text, lang)]


class SentenceSpans(Step):
    """Expand each document into its sentences of ``min_chars``..``max_chars`` characters (RTP mode).

    A document with no sentence in range is rejected (``NO_SPAN``); sentences out of range are counted
    (``too_short`` / ``too_long``), not stored, since they never were candidate prompts.
    """

    name: ClassVar[str] = "sentences"

    def __init__(self, min_chars: int = RTP_SPAN_MIN_CHARS, max_chars: int = RTP_SPAN_MAX_CHARS) -> None:
        self.min_chars = min_chars
        self.max_chars = max_chars

    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        for doc in docs:
            kept = 0
            for begin, end in sentence_spans(doc.text, doc.lang):
                length = end - begin
                ctx.count(self.name, "sentences")
                if length < self.min_chars:
                    ctx.count(self.name, "too_short")
                    continue
                if length > self.max_chars:
                    ctx.count(self.name, "too_long")
                    continue
                kept += 1
                yield Document(
                    id=f"{doc.id}:{begin}:{end}",
                    text=doc.text[begin:end],
                    lang=doc.lang,
                    declared_lang=doc.declared_lang,
                    detected_lang=doc.detected_lang,
                    url=doc.url,
                    timestamp=doc.timestamp,
                    location=doc.location,
                    data_category=doc.data_category,
                    pile_set_name=doc.pile_set_name,
                    parent_id=doc.id,
                    begin=begin,
                    end=end,
                    extra=doc.extra,
                )
            if not kept:
                ctx.reject(
                    Rejected.of(self.name, f"NO_SPAN: no sentence of {self.min_chars}-{self.max_chars} characters", doc)
                )

    def describe(self) -> dict[str, Any]:
        return {"step": self.name, "segmenter": "sentencex", "min_chars": self.min_chars, "max_chars": self.max_chars}
