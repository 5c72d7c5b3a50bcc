"""Steps that decide which documents' languages to keep.

``LanguageFilter`` keeps only the languages asked for. ``LanguageCheck`` runs py3langid (restricted to
PTP's 17 languages, ``polytox.langs.detect``) on every document that declares a language and records any
mismatch. The policy decides what a mismatch does: ``drop`` rejects the document with the reason
``LANG_MISMATCH: declared X, detected Y`` (kept in the rejected parts, so nothing is lost); ``keep`` keeps
it under its declared language and marks ``detected_lang``; ``off`` skips detection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar

from ..errors import PolytoxError
from .document import Document, Rejected
from .pipeline import Step, StepContext

POLICIES = ("drop", "keep", "off")


class LanguageFilter(Step):
    name: ClassVar[str] = "lang_filter"

    def __init__(self, langs: tuple[str, ...]) -> None:
        self.langs = frozenset(langs)

    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        for doc in docs:
            if doc.lang in self.langs:
                yield doc
            else:
                ctx.reject(Rejected.of(self.name, f"LANG_NOT_SELECTED: {doc.lang} is not in --lang", doc))

    def describe(self) -> dict[str, Any]:
        return {"step": self.name, "langs": sorted(self.langs)}


class LanguageCheck(Step):
    name: ClassVar[str] = "lang_check"

    def __init__(self, policy: str = "drop") -> None:
        if policy not in POLICIES:
            raise PolytoxError(f"language mismatch policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.policy = policy

    def run(self, docs: Iterator[Document], ctx: StepContext) -> Iterator[Document]:
        from ..langs.detect import detect_language

        for doc in docs:
            if self.policy == "off" or doc.declared_lang is None:
                yield doc
                continue
            detected = detect_language(doc.text)
            doc = dataclasses.replace(doc, detected_lang=detected)
            if detected == doc.declared_lang:
                ctx.count(self.name, "match")
                yield doc
                continue
            ctx.count(self.name, "mismatch")
            ctx.count(self.name, f"mismatch:{doc.declared_lang}->{detected}")
            if self.policy == "drop":
                ctx.reject(
                    Rejected.of(
                        self.name,
                        f"LANG_MISMATCH: declared {doc.declared_lang}, detected {detected}",
                        doc,
                        detected_lang=detected,
                    )
                )
            else:
                yield doc

    def describe(self) -> dict[str, Any]:
        return {"step": self.name, "policy": self.policy, "detector": "py3langid (PTP's 17 languages)"}
