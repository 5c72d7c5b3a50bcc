"""A step that rejects units whose split would leave a blank prompt or continuation.

It runs before scoring, so no scorer call is spent on a document that can never become a prompt, and
so every selected unit is guaranteed to split (``polytox eval`` rejects blank prompts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ..constants import RTP_PROMPT_MAX_TOKENS
from .document import Document, Rejected
from .pipeline import Step, StepContext
from .split import split_unit


class Splittable(Step):
    name: ClassVar[str] = "splittable"

    def __init__(self, mode: str, max_prompt_tokens: int = RTP_PROMPT_MAX_TOKENS) -> None:
        self.mode = mode
        self.max_prompt_tokens = max_prompt_tokens

    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        for doc in docs:
            if split_unit(doc.text, doc.lang, self.mode, self.max_prompt_tokens) is None:
                ctx.reject(
                    Rejected.of(
                        self.name,
                        f"UNSPLITTABLE: a {self.mode.upper()} split leaves a blank prompt or continuation",
                        doc,
                    )
                )
            else:
                yield doc

    def describe(self) -> dict[str, Any]:
        return {"step": self.name, "mode": self.mode, "max_prompt_tokens": self.max_prompt_tokens}
