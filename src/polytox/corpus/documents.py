"""A corpus as a stream of ``CorpusDoc`` rows, with a defined status for every kind of bad input.

Sources are the build readers' (``polytox.promptset.readers``: JSONL / Parquet / CSV files and folders, a
Hugging Face dataset streamed by id, with a ``FieldMap`` for the field names), plus folders of ``.txt``
files, one document per file (OpenWebText's extracted form). The stream order is stable, so the n-th
document is the same on every run, which is what makes the shard plan of ``corpus score`` resumable.

Nothing raises on a bad record; each document gets a ``status``:

- ``ok``: text to score;
- ``unreadable``: the reader could not parse the line (malformed JSON, invalid UTF-8); ``error`` holds
  the reason and ``location`` the ``file:line``;
- ``empty``: no text, or whitespace only;
- ``binary``: a NUL byte, a lone surrogate, or more than ``BINARY_CONTROL_SHARE`` control characters;
- ``unsupported_language``: set later by the scorer step when the scorer cannot score ``lang``.

A document longer than the scorer's byte budget is cut before scoring and flagged ``truncated`` (it stays
``ok``). A declared language that is not an ISO 639-1 code, or a detection below ``LANGID_MIN_PROB``,
gives ``lang = "und"`` (``lang_source = "unknown"``). A missing URL gives ``url = domain = None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._util.textutil import utf8_len
from ..errors import PolytoxError
from ..langs import UnknownLanguageError, normalize_lang
from ..prompts.readers import RawRecord, file_kind, read_records
from ..prompts.records import dig, short_hash
from ..promptset.readers import (
    ID_FIELDS,
    LANG_FIELDS,
    TEXT_FIELDS,
    URL_FIELDS,
    CorpusSource,
    FieldMap,
    first_field,
    iter_source,
)
from .domains import domain_of

UNKNOWN_LANG = "und"
# A detection less sure than this is "und": the identifier is restricted to PTP's 17 languages, so text in
# any other language is still given one of them, with a low probability.
LANGID_MIN_PROB = 0.5
BINARY_CONTROL_SHARE = 0.1
# Unicode category Cc (C0 and C1 controls) except the whitespace ones (tab, newlines, form feed).
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")
STATUSES = ("ok", "unreadable", "empty", "binary", "unsupported_language", "score_failed")


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    """One document of a corpus, ready to score (``status == "ok"``) or with the reason it is not."""

    doc_id: str
    location: str
    text: str
    status: str
    lang: str = UNKNOWN_LANG
    lang_source: str = "unknown"
    url: str | None = None
    domain: str | None = None
    length_chars: int = 0
    length_bytes: int = 0
    error: str | None = None
    meta: Mapping[str, str | None] = field(default_factory=dict)


def _is_binary(text: str) -> str | None:
    """Why ``text`` looks binary, or None."""
    if "\x00" in text:
        return "contains a NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"invalid Unicode (lone surrogate at {exc.start})"
    sample = text[:4096]
    controls = len(_CONTROL.findall(sample))
    if sample and controls / len(sample) > BINARY_CONTROL_SHARE:
        return f"{controls} control characters in the first {len(sample)}"
    return None


def _language(text: str, declared: Any, default_lang: str | None, detect: bool) -> tuple[str, str]:
    for value in (declared, default_lang):
        if value is not None and str(value).strip():
            try:
                return normalize_lang(str(value)), "declared"
            except UnknownLanguageError:
                return UNKNOWN_LANG, "unknown"
    if not detect:
        return UNKNOWN_LANG, "unknown"
    from ..langs.detect import detect_ptp_language

    lang, prob = detect_ptp_language(text)
    return (lang, "detected") if prob >= LANGID_MIN_PROB else (UNKNOWN_LANG, "unknown")


def to_doc(raw: RawRecord, fields: FieldMap, keep: Sequence[str] = (), detect_lang: bool = True) -> CorpusDoc:
    """One raw record as a ``CorpusDoc`` (never raises on bad input; see the module docstring)."""
    if raw.error is not None or not isinstance(raw.record, Mapping):
        error = raw.error or f"expected a JSON object, got {type(raw.record).__name__}"
        return CorpusDoc(
            doc_id="loc:" + short_hash(raw.location), location=raw.location, text="", status="unreadable", error=error
        )
    record = raw.record
    text_value = first_field(record, fields.text, TEXT_FIELDS)
    url_value = first_field(record, fields.url, URL_FIELDS)
    url = str(url_value) if url_value is not None else None
    raw_id = first_field(record, fields.id, ID_FIELDS)
    meta = {k: (None if (v := dig(record, k)) is None else str(v)) for k in keep}
    base: dict[str, Any] = {"location": raw.location, "url": url, "domain": domain_of(url), "meta": meta}
    if text_value is not None and not isinstance(text_value, str):
        text_value = text_value.decode("utf-8", "replace") if isinstance(text_value, bytes) else None
        if text_value is None:
            return CorpusDoc(
                doc_id="loc:" + short_hash(raw.location),
                text="",
                status="unreadable",
                error="the text field is not a string",
                **base,
            )
    text = text_value or ""
    doc_id = str(raw_id) if raw_id is not None else short_hash(url or "", text or raw.location)
    if not text.strip():
        return CorpusDoc(doc_id=doc_id, text="", status="empty", error="empty or whitespace-only text", **base)
    why = _is_binary(text)
    if why is not None:
        return CorpusDoc(
            doc_id=doc_id, text="", status="binary", error=f"binary content: {why}", length_chars=len(text), **base
        )
    lang, source = _language(text, first_field(record, fields.lang, LANG_FIELDS), fields.default_lang, detect_lang)
    return CorpusDoc(
        doc_id=doc_id,
        text=text,
        status="ok",
        lang=lang,
        lang_source=source,
        length_chars=len(text),
        length_bytes=utf8_len(text),
        **base,
    )


def read_text_file(path: Path, root: Path) -> RawRecord:
    """A ``.txt`` file as one record (``id`` = its path under ``root``); bad bytes become an error."""
    data = path.read_bytes()
    rel = str(path.relative_to(root)) if path != root else path.name
    if b"\x00" in data:
        return RawRecord(str(path), record={"id": rel, "text": "\x00"})  # classified as binary by to_doc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RawRecord(str(path), error=f"invalid UTF-8 at byte {exc.start}")
    return RawRecord(str(path), record={"id": rel, "text": text})


def _iter_path(path: Path) -> Iterator[RawRecord]:
    if not path.exists():
        raise PolytoxError(f"corpus path not found: {path}")
    if path.is_file():
        if path.suffix == ".txt":
            yield read_text_file(path, path.parent)
        else:
            yield from read_records(path)
        return
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        if file.suffix == ".txt":
            yield read_text_file(file, path)
            continue
        try:
            file_kind(file)
        except PolytoxError:
            continue
        yield from read_records(file)


def iter_raw(source: CorpusSource) -> Iterator[RawRecord]:
    """The raw records of a source in a stable order, cut to ``source.limit``: the build's reader
    (``promptset.readers.iter_source``) with ``.txt`` files and folders read too."""
    return iter_source(source, _iter_path, path_flag="PATH")


def iter_docs(
    source: CorpusSource, fields: FieldMap, keep: Sequence[str] = (), detect_lang: bool = True
) -> Iterator[CorpusDoc]:
    """Every record of ``source`` as a ``CorpusDoc``, bad ones included with their status."""
    for raw in iter_raw(source):
        yield to_doc(raw, fields, keep, detect_lang)
