"""Corpus readers: local JSONL / Parquet / CSV files and streamed Hugging Face datasets, as ``Document``s.

Readers yield ``RawRecord``s (location + record, or the error that made a line unreadable) lazily, so a
corpus of any size streams through in constant memory. ``parse_records`` maps a record's fields onto a
``Document`` with a ``FieldMap``: by default it understands mC4/C4-like records (``text``, ``url``,
``timestamp``), Pile-like records (``text``, ``meta.pile_set_name``), PTP records (``text``,
``meta_data.*``) and RTP-LX records (``Prompt``, ``Locale``, ``Index``). A record it cannot use becomes a
``Rejected`` with ``file:line`` and the reason; it never stops the build.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PolytoxError, require
from ..prompts.readers import RawRecord, read_records
from ..prompts.records import RecordError, check_lang, check_text, dig, short_hash
from .document import Document, Rejected
from .pipeline import StepContext

PARSE_STEP = "read"

TEXT_FIELDS = ("text", "content", "document", "Prompt")
LANG_FIELDS = ("lang", "language", "meta.lang", "meta_data.lang", "Locale")
ID_FIELDS = ("id", "doc_id", "Index", "meta.id")
URL_FIELDS = ("url", "meta.url", "meta_data.url")
TIMESTAMP_FIELDS = ("timestamp", "meta.timestamp", "meta_data.timestamp", "date", "created_at")
PILE_SET_FIELDS = ("meta.pile_set_name", "meta_data.pile_set_name", "pile_set_name")
CATEGORY_FIELDS = ("meta_data.data_category", "data_category")


@dataclass(frozen=True)
class FieldMap:
    """Which record fields hold a document's parts (dotted paths); ``None`` tries the usual names.

    ``default_lang`` is the language of a whole single-language corpus (an mC4 config, say), used when a
    record declares none.
    """

    text: str | None = None
    lang: str | None = None
    id: str | None = None
    url: str | None = None
    timestamp: str | None = None
    default_lang: str | None = None


@dataclass(frozen=True)
class CorpusSource:
    """Local paths (files or folders), or one Hugging Face dataset streamed with ``datasets``."""

    paths: tuple[str, ...] = ()
    hf_dataset: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    hf_data_files: tuple[str, ...] = ()
    limit: int | None = None

    def check(self) -> None:
        """Refuse a source that names nothing, or a local path that does not exist (before any work)."""
        if not self.hf_dataset and not self.paths:
            raise PolytoxError("no corpus given: pass --input PATH (repeatable) or --hf-dataset NAME")
        for p in self.paths:
            if not Path(p).exists():
                raise PolytoxError(f"corpus input not found: {p}")

    def describe(self) -> str:
        if self.hf_dataset:
            return f"hf://{self.hf_dataset}/{self.hf_config or ''}/{self.hf_split}"
        return ", ".join(self.paths)


def first_field(record: Mapping[str, Any], explicit: str | None, defaults: Sequence[str]) -> Any:
    """The value at ``explicit`` (a dotted path), or at the first of ``defaults`` that holds a non-empty one."""
    for path in (explicit,) if explicit else defaults:
        value = dig(record, path)
        if value is not None and value != "":
            return value
    return None


def read_hf_documents(
    name: str, config: str | None, split: str, data_files: tuple[str, ...] = ()
) -> Iterator[RawRecord]:
    """Stream a Hugging Face dataset (hub id, or a builder like ``json`` with local ``data_files``)."""
    datasets = require("datasets", "datasets")
    kwargs: dict[str, Any] = {"split": split, "streaming": True}
    if data_files:
        kwargs["data_files"] = list(data_files)
    try:
        ds = datasets.load_dataset(name, config, **kwargs)
    except Exception as exc:  # network, gating, unknown id: one clear message, no traceback
        raise PolytoxError(f"cannot stream Hugging Face dataset {name!r} ({config}, {split}): {exc}") from exc
    for i, row in enumerate(ds, start=1):
        yield RawRecord(f"hf://{name}/{config or ''}/{split}:row {i}", record=row)


def iter_source(
    source: CorpusSource,
    read_path: Callable[[Path], Iterator[RawRecord]] = read_records,
    *,
    path_flag: str = "--input PATH",
) -> Iterator[RawRecord]:
    """The raw records of a source in a stable order, cut to ``limit`` records when set. ``read_path`` reads
    one local path (``polytox.corpus`` passes one that also reads folders of ``.txt`` files); ``path_flag``
    names the flag for a path in the error when the source names nothing."""
    if source.hf_dataset:
        stream: Iterator[RawRecord] = read_hf_documents(
            source.hf_dataset, source.hf_config, source.hf_split, source.hf_data_files
        )
    elif source.paths:
        stream = itertools.chain.from_iterable(read_path(Path(p)) for p in source.paths)
    else:
        raise PolytoxError(f"no corpus given: pass {path_flag} (repeatable) or --hf-dataset NAME")
    return itertools.islice(stream, source.limit) if source.limit is not None else stream


def _timestamp(value: Any) -> str | None:
    """Timestamps as ISO 8601 text (``datasets`` turns mC4's strings into datetimes)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime | dt.date):
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return str(value)


def parse_record(raw: RawRecord, fields: FieldMap) -> Document:
    """One raw record as a ``Document``; raises ``RecordError`` with the reason when it cannot be used."""
    if raw.error is not None:
        raise RecordError(raw.error)
    record = raw.record
    if not isinstance(record, Mapping):
        raise RecordError(f"expected a JSON object, got {type(record).__name__}")
    text_field = fields.text or next((f for f in TEXT_FIELDS if dig(record, f) is not None), TEXT_FIELDS[0])
    text = check_text(dig(record, text_field), text_field)
    lang_value = first_field(record, fields.lang, LANG_FIELDS)
    declared = check_lang(lang_value, fields.lang or "lang") if lang_value is not None else None
    if declared is None and fields.default_lang:
        declared = check_lang(fields.default_lang, "default_lang")
    url = first_field(record, fields.url, URL_FIELDS)
    timestamp = first_field(record, fields.timestamp, TIMESTAMP_FIELDS)
    raw_id = first_field(record, fields.id, ID_FIELDS)
    extra: dict[str, Any] = {}
    if declared is None:
        from ..langs.detect import detect_language

        lang = detect_language(text)
        extra["lang_source"] = "detected"
    else:
        lang = declared
    doc_id = f"{lang}:{raw_id}" if raw_id is not None else f"{lang}:{short_hash(str(url or ''), text)}"
    return Document(
        id=doc_id,
        text=text,
        lang=lang,
        declared_lang=declared,
        detected_lang=lang if declared is None else None,
        url=str(url) if url is not None else None,
        timestamp=_timestamp(timestamp),
        location=raw.location,
        data_category=str(first_field(record, None, CATEGORY_FIELDS) or "web"),
        pile_set_name=str(pile) if (pile := first_field(record, None, PILE_SET_FIELDS)) is not None else None,
        extra=extra,
    )


def parse_records(raws: Iterator[RawRecord], fields: FieldMap, ctx: StepContext) -> Iterator[Document]:
    """Documents of the raw records; unusable ones are rejected with ``file:line`` and the reason."""
    for raw in raws:
        ctx.count(PARSE_STEP, "in")
        try:
            doc = parse_record(raw, fields)
        except RecordError as exc:
            text = raw.record.get("text") if isinstance(raw.record, Mapping) else None
            ctx.reject(
                Rejected(
                    step=PARSE_STEP,
                    reason=f"BAD_RECORD: {exc}",
                    location=raw.location,
                    text=text if isinstance(text, str) else None,
                )
            )
            continue
        ctx.count(PARSE_STEP, "out")
        yield doc
