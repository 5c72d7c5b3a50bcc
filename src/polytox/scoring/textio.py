"""Texts to score, read from JSONL, CSV or Parquet, one ``TextRow`` per text, in input order.

Used by ``polytox score``, ``compare-scorers`` and ``calibrate``. A bad row never stops the read: it
becomes a row with an ``error`` (file and line in the message), so the output still has one row per
input row. Defined behaviour (tested):

- invalid UTF-8 (JSONL line, CSV field, Parquet binary column) or lone surrogates -> ``INVALID_UTF8``;
- malformed JSON / CSV -> ``BAD_INPUT``; a missing or non-string text -> ``BAD_INPUT``;
- empty or whitespace-only text -> ``EMPTY_TEXT`` (the scorers' own error, never a 0);
- an unknown language code -> ``UNKNOWN_LANGUAGE``; a missing one -> ``default_lang``, else detected with
  py3langid (restricted to PTP's 17 languages) and flagged ``lang_detected``.

Record layouts are recognised from the first readable record (``layout="auto"``): a flat ``text``
column; RealToxicityPrompts (``prompt.text`` and ``continuation.text``, two rows per record, English);
RTP-LX (``Prompt``, ``Locale``, ``Index``); PolygloToxicityPrompts (``prompt`` and ``continuation``,
``meta_data.lang``). Each row remembers its record, so reference columns (``@toxicity``) can be read
next to the text they belong to.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import PolytoxError
from ..langs import UnknownLanguageError, normalize_lang
from ..prompts.readers import RawRecord, file_kind, read_file, supported_files
from ..prompts.records import dig
from .base import EMPTY_TEXT_ERROR


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a record keeps its text(s), id and language."""

    name: str
    text_fields: tuple[str, ...]
    id_field: str
    lang_field: str
    default_lang: str | None = None


LAYOUTS = {
    "generic": Layout("generic", ("text",), "id", "lang"),
    "rtp": Layout("rtp", ("prompt.text", "continuation.text"), "filename", "lang", "en"),
    "rtplx": Layout("rtplx", ("Prompt",), "Index", "Locale"),
    "ptp": Layout("ptp", ("prompt", "continuation"), "meta_data.url", "meta_data.lang"),
}


@dataclass(frozen=True, slots=True)
class TextRow:
    """One text to score; ``error`` is set when the row cannot be scored (and says why)."""

    position: int
    location: str
    id: str | None
    text: str | None
    lang: str | None
    lang_detected: bool = False
    part: str | None = None
    record: Mapping[str, Any] | None = None
    error: str | None = None
    field: str = "text"


def parent_of(record: Mapping[str, Any], text_field: str) -> Any:
    head, _, _ = text_field.rpartition(".")
    return dig(record, head) if head else record


def guess_layout(record: Any) -> Layout:
    if isinstance(record, Mapping):
        if isinstance(record.get("prompt"), Mapping) and "text" in record["prompt"]:
            return LAYOUTS["rtp"]
        if "Prompt" in record and ("Locale" in record or "Index" in record):
            return LAYOUTS["rtplx"]
        if "text" in record:
            return LAYOUTS["generic"]
        if isinstance(record.get("prompt"), str) and "meta_data" in record:
            return LAYOUTS["ptp"]
    keys = sorted(record)[:8] if isinstance(record, Mapping) else type(record).__name__
    raise PolytoxError(
        f"cannot tell where the text is in records like {keys}: give --text-field (e.g. text, prompt.text)"
    )


def _has_surrogate(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def read_raw(path: Path) -> Iterator[RawRecord]:
    """Records of a file, or of every JSONL/CSV/Parquet file in a folder (sorted by name)."""
    if not path.exists():
        raise PolytoxError(f"input file not found: {path}")
    if path.is_dir():
        files = supported_files(path)
        if not files:
            raise PolytoxError(f"{path}: no .jsonl, .csv or .parquet files in this folder")
        return (rec for file in files for rec in read_raw(file))
    if file_kind(path) == "csv" and path.name.endswith(".gz"):
        raise PolytoxError(f"{path}: gzipped CSV is not supported; decompress it first")
    return read_file(path, name_column=True)


def _clean(value: str) -> str:
    """An id or label safe to write anywhere: lone surrogates become backslash escapes."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _text_of(value: Any) -> tuple[str | None, str | None]:
    """(text, error) for a field value: strings pass, bytes must be UTF-8, anything else is an error."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"INVALID_UTF8: invalid UTF-8 at byte {exc.start}"
    if not isinstance(value, str):
        return None, f"BAD_INPUT: expected a string, got {type(value).__name__}"
    at = _has_surrogate(value)
    if at is not None:
        return None, f"INVALID_UTF8: invalid Unicode (lone surrogate) at character {at}"
    if not value.strip():
        return value, EMPTY_TEXT_ERROR
    return value, None


def read_text_rows(
    path: Path | str,
    *,
    layout: str = "auto",
    text_fields: Sequence[str] = (),
    id_field: str | None = None,
    lang_field: str | None = None,
    default_lang: str | None = None,
    detect: bool = True,
) -> list[TextRow]:
    """All rows of ``path`` (one per text field per record), errors included, in input order."""
    path = Path(path)
    raw = list(read_raw(path))
    if not raw:
        raise PolytoxError(f"{path}: no records (the input is empty)")
    chosen: Layout | None = LAYOUTS.get(layout) if layout != "auto" else None
    if layout not in LAYOUTS and layout != "auto":
        raise PolytoxError(f"unknown layout {layout!r}; known: auto, {', '.join(LAYOUTS)}")
    if chosen is None:
        first = next((r.record for r in raw if r.error is None and isinstance(r.record, Mapping)), None)
        chosen = guess_layout(first) if first is not None else LAYOUTS["generic"]
    if text_fields:
        chosen = replace(chosen, text_fields=tuple(text_fields))
    if id_field:
        chosen = replace(chosen, id_field=id_field)
    if lang_field:
        chosen = replace(chosen, lang_field=lang_field)
    fallback_lang = normalize_lang(default_lang) if default_lang else chosen.default_lang

    rows: list[TextRow] = []
    multi = len(chosen.text_fields) > 1
    for index, item in enumerate(raw):
        for field in chosen.text_fields:
            part = field.split(".")[0] if multi else None
            rows.append(_row(len(rows), index, item, field, part, chosen, fallback_lang, detect))
    return rows


def rows_from_texts(texts: Sequence[Any], langs: Sequence[str | None]) -> list[TextRow]:
    """One row per text, read as ``read_text_rows`` reads a generic record ``{"id": i, "text": ..., "lang":
    ...}``: the same text checks and error codes, and a missing language (None) detected with py3langid.

    Row ids are the texts' positions (``"0"``, ``"1"``...); the location in messages is ``texts[i]``.
    """
    layout = LAYOUTS["generic"]
    return [
        _row(
            i, i, RawRecord(f"texts[{i}]", {"id": str(i), "text": text, "lang": lang}), "text", None, layout, None, True
        )
        for i, (text, lang) in enumerate(zip(texts, langs, strict=True))
    ]


def _row(
    position: int,
    index: int,
    item: RawRecord,
    field: str,
    part: str | None,
    layout: Layout,
    fallback_lang: str | None,
    detect: bool,
) -> TextRow:
    loc = item.location
    if item.error is not None:
        code = "INVALID_UTF8" if "UTF-8" in item.error else "BAD_INPUT"
        message = item.error if item.error.startswith(code) else f"{code}: {item.error}"
        return TextRow(position, loc, None, None, None, part=part, error=f"{message} ({loc})", field=field)
    record = item.record
    if not isinstance(record, Mapping):
        return TextRow(
            position,
            loc,
            None,
            None,
            None,
            part=part,
            field=field,
            error=f"BAD_INPUT: expected an object, got {type(record).__name__} ({loc})",
        )
    raw_id = dig(record, layout.id_field)
    row_id = _clean(str(raw_id)) if raw_id not in (None, "") else str(index)
    value = dig(record, field)
    if value is None:
        return TextRow(
            position,
            loc,
            row_id,
            None,
            None,
            part=part,
            record=record,
            field=field,
            error=f"BAD_INPUT: missing field {field!r} ({loc})",
        )
    text, error = _text_of(value)
    lang_raw = dig(parent_of(record, field), layout.lang_field)
    if lang_raw is None:
        lang_raw = dig(record, layout.lang_field)
    lang: str | None
    detected = False
    if lang_raw not in (None, ""):
        try:
            lang = normalize_lang(str(lang_raw))
        except UnknownLanguageError as exc:
            shown = str(lang_raw) if _has_surrogate(str(lang_raw)) is None else None
            return TextRow(
                position,
                loc,
                row_id,
                text,
                shown,
                part=part,
                record=record,
                field=field,
                error=error or f"UNKNOWN_LANGUAGE: {exc} ({loc})",
            )
    elif fallback_lang:
        lang = fallback_lang
    elif detect and error is None and text is not None:
        from ..langs.detect import detect_language

        lang, detected = detect_language(text), True
    else:
        lang = None
    if error is not None and error != EMPTY_TEXT_ERROR:
        error = f"{error} ({loc})"
    return TextRow(position, loc, row_id, text, lang, detected, part, record, error, field)


_RANGE = re.compile(r"^(?P<col>[^\[]+)\[(?P<lo>-?[\d.]+):(?P<hi>-?[\d.]+)\]$")


@dataclass(frozen=True)
class ReferenceColumn:
    """``@COL`` (or ``@COL[lo:hi]``, linearly mapped onto [0, 1]): a stored score next to each text.

    ``COL`` is looked up beside the text first (``@toxicity`` next to ``prompt.text`` is
    ``prompt.toxicity``), then at the top of the record; ``{part}`` is replaced by the text's part
    (``@{part}_perspective.attributeScores.TOXICITY.summaryScore.value`` for PTP).
    """

    spec: str
    column: str
    lo: float = 0.0
    hi: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> ReferenceColumn:
        body = spec[1:] if spec.startswith("@") else spec
        match = _RANGE.match(body)
        if match:
            lo, hi = float(match["lo"]), float(match["hi"])
            if not hi > lo:
                raise PolytoxError(f"{spec}: the range [lo:hi] needs hi > lo")
            return cls(spec, match["col"], lo, hi)
        return cls(spec, body)

    @property
    def id(self) -> str:
        return self.spec if self.spec.startswith("@") else f"@{self.spec}"

    def value(self, row: TextRow) -> tuple[float | None, str | None]:
        """(value in [0, 1], None) or (None, reason) for one row."""
        if row.record is None:
            return None, row.error or "no record"
        column = self.column.replace("{part}", row.part or "")
        raw = dig(parent_of(row.record, row.field), column)
        if raw is None:
            raw = dig(row.record, column)
        if raw is None:
            return None, f"MISSING_REFERENCE: no value in column {column!r}"
        if isinstance(raw, bool):
            return None, f"BAD_REFERENCE: {column!r} is a boolean"
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return None, f"BAD_REFERENCE: {column!r} is not a number: {raw!r}"
        if math.isnan(value):
            return None, f"MISSING_REFERENCE: {column!r} is NaN"
        scaled = (value - self.lo) / (self.hi - self.lo)
        if not -1e-9 <= scaled <= 1 + 1e-9:
            return None, f"BAD_REFERENCE: {column!r} = {value} is outside [{self.lo}, {self.hi}]"
        return min(1.0, max(0.0, scaled)), None


def json_line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, allow_nan=False)
