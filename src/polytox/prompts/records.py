"""Turn one raw record (RTP, PTP, RTP-LX or generic) into a validated ``Prompt``.

Every rejection is a ``RecordError`` with a one-line reason; the reader adds file and line.
Defined behaviour for hostile text (tested): empty or whitespace-only text, text of only invisible
characters (zero-width spaces, joiners, other format or control characters), NUL bytes and lone UTF-16
surrogates are rejected, never repaired silently; an id with a NUL byte or a lone surrogate (which no run
file can store) is rejected; unknown language codes are rejected with the list of PTP languages; a toxicity
that is not a finite number in [0, 1] is rejected (NaN, and a string such as ``"0.5"``: a JSON value is
taken as written), ``null`` means unknown. A CSV cell is text by nature: the numeric columns of a CSV are
read as numbers first (``numbers_from_cells``), so ``0.4`` there is the number and ``nan`` there is NaN.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

from ..constants import toxicity_bucket
from ..langs import UnknownLanguageError, normalize_lang
from ..types import Prompt

FORMATS = ("rtp", "ptp", "rtplx", "generic")


class RecordError(ValueError):
    """A record polytox cannot use; the message is the reason shown to the user."""


def detect_format(record: Mapping[str, Any]) -> str:
    """Guess a record's format from its keys."""
    prompt = record.get("prompt")
    if isinstance(prompt, Mapping):
        return "rtp"
    if "Prompt" in record and ("Locale" in record or "Index" in record):
        return "rtplx"
    if isinstance(prompt, str) and (
        {"meta_data", "toxicity_bucket", "prompt_perspective", "prompt_toxicity"} & set(record)
    ):
        return "ptp"
    if "text" in record:
        return "generic"
    raise RecordError(
        f"cannot tell the record's format from its keys {sorted(record)[:8]}: expected RTP ('prompt': "
        "{'text'}), PTP ('prompt', 'meta_data'), RTP-LX ('Prompt', 'Locale') or a 'text' column"
    )


def check_text(text: Any, field: str) -> str:
    """Validate prompt text; see the module docstring for the rules."""
    if text is None:
        raise RecordError(f"missing field {field!r}")
    if not isinstance(text, str):
        raise RecordError(f"field {field!r} must be a string, got {type(text).__name__}")
    _check_storable(text, field)
    if not text.strip():
        raise RecordError(f"field {field!r} is empty or whitespace only")
    if all(c.isspace() or unicodedata.category(c) in _INVISIBLE for c in text):
        shown = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(text) if not c.isspace())
        raise RecordError(f"field {field!r} holds only invisible characters ({shown})")
    return text


_INVISIBLE = ("Cf", "Cc")  # format (zero-width space, joiners, BOM, bidi marks) and control characters


def check_id(value: Any, field: str = "id") -> str:
    """A record's id as text; a NUL byte or a lone surrogate (which no run file can store) is refused."""
    text = str(value)
    _check_storable(text, field)
    return text


def _check_storable(text: str, field: str) -> None:
    """Refuse what no run file can store: a NUL byte or a lone surrogate."""
    if "\x00" in text:
        raise RecordError(f"field {field!r} contains a NUL byte")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(f"field {field!r} contains a lone surrogate (invalid Unicode at {exc.start})") from None


# The numeric columns a flat record may hold; from a CSV their cells are text, read as numbers here.
_NUMBER_CELLS = {"toxicity": float, "prompt_toxicity": float, "toxicity_bucket": int}


def numbers_from_cells(record: Mapping[str, Any]) -> dict[str, Any]:
    """A CSV row with its numeric columns read as numbers (a cell that is no number stays text, and is
    refused by the field's check with its value)."""
    out = dict(record)
    for name, kind in _NUMBER_CELLS.items():
        cell = out.get(name)
        if isinstance(cell, str):
            with contextlib.suppress(ValueError):
                out[name] = kind(cell.strip())
    return out


def check_toxicity(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):  # true/false, "0.5": not a score
        raise RecordError(f"field {field!r} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise RecordError(f"field {field!r} must be a number in [0, 1], got NaN (null means unknown)")
    if not 0.0 <= value <= 1.0:
        raise RecordError(f"field {field!r} must be in [0, 1], got {value}")
    return value


def check_lang(value: Any, field: str) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RecordError(f"missing field {field!r}")
    try:
        return normalize_lang(str(value))
    except UnknownLanguageError as exc:
        raise RecordError(str(exc)) from None


def dig(record: Any, path: str) -> Any:
    """The value at dotted ``path`` (``a.b.c``) inside nested mappings, or None when any step is missing."""
    node: Any = record
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def short_hash(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def from_rtp(record: Mapping[str, Any]) -> Prompt:
    """RealToxicityPrompts: ``prompt.text``/``prompt.toxicity``; id from ``filename``/``begin``/``end``.

    RTP itself is English; a top-level ``lang`` (written by ``polytox build`` for RTP-style sets in
    other languages) overrides that."""
    text = check_text(dig(record, "prompt.text"), "prompt.text")
    lang = check_lang(record["lang"], "lang") if record.get("lang") not in (None, "") else "en"
    tox = check_toxicity(dig(record, "prompt.toxicity"), "prompt.toxicity")
    if record.get("filename") is not None:
        pid = f"rtp:{record['filename']}:{record.get('begin')}:{record.get('end')}"
    else:
        pid = f"rtp:{short_hash(text)}"
    meta: dict[str, Any] = {}
    if "challenging" in record:
        meta["challenging"] = bool(record["challenging"])
    cont = dig(record, "continuation.text")
    if isinstance(cont, str):
        meta["continuation"] = cont
        meta["continuation_toxicity"] = check_toxicity(dig(record, "continuation.toxicity"), "continuation.toxicity")
    bucket = toxicity_bucket(tox) if tox is not None else None
    return Prompt(id=pid, text=text, lang=lang, toxicity=tox, bucket=bucket, source="rtp", meta=meta)


def _perspective_value(response: Any, attribute: str = "TOXICITY") -> Any:
    if isinstance(response, Mapping):
        return dig(response, f"attributeScores.{attribute}.summaryScore.value")
    return None


def from_ptp(record: Mapping[str, Any]) -> Prompt:
    """PolygloToxicityPrompts: ``prompt``; the prompt's own Perspective score when present (else the
    document's ``toxicity``); ``meta_data.lang``; ``toxicity_bucket``."""
    text = check_text(record.get("prompt"), "prompt")
    lang = check_lang(dig(record, "meta_data.lang") or record.get("lang"), "meta_data.lang")
    tox_raw = _perspective_value(record.get("prompt_perspective"))
    field = "prompt_perspective"
    if tox_raw is None:
        tox_raw, field = record.get("prompt_toxicity"), "prompt_toxicity"
    if tox_raw is None:
        tox_raw, field = record.get("toxicity"), "toxicity"
    tox = check_toxicity(tox_raw, field)
    bucket = record.get("toxicity_bucket")
    if bucket is not None and (isinstance(bucket, bool) or bucket not in (0, 1, 2, 3)):
        raise RecordError(f"field 'toxicity_bucket' must be 0..3, got {bucket!r}")
    if bucket is None and tox is not None:
        bucket = toxicity_bucket(tox)
    url = str(dig(record, "meta_data.url") or "")
    meta = {"url": url} if url else {}
    if isinstance(record.get("continuation"), str):
        meta["continuation"] = record["continuation"]
    return Prompt(
        id=f"ptp:{lang}:{short_hash(url, text)}",
        text=text,
        lang=lang,
        toxicity=tox,
        bucket=bucket,
        source="ptp",
        meta=meta,
    )


def from_rtplx(record: Mapping[str, Any]) -> Prompt:
    """RTP-LX: ``Prompt``, ``Locale``, ``Index``; the mean human Toxicity rating (1-5) is mapped to
    [0, 1] as (mean - 1) / 4, so a mean of 3 (the dataset's "toxic" cut) lands exactly on 0.5."""
    text = check_text(record.get("Prompt"), "Prompt")
    lang = check_lang(record.get("Locale"), "Locale")
    index = record.get("Index")
    if index is None or str(index).strip() == "":
        raise RecordError("missing field 'Index'")
    rating = dig(record, "Annotations.Toxicity")
    tox = None
    if rating is not None:
        try:
            rating = float(rating)
        except (TypeError, ValueError):
            raise RecordError(f"field 'Annotations.Toxicity' must be a number, got {rating!r}") from None
        if not 1.0 <= rating <= 5.0:
            raise RecordError(f"field 'Annotations.Toxicity' must be in [1, 5], got {rating}")
        tox = (rating - 1.0) / 4.0
    meta = {"index": str(index), "locale": str(record.get("Locale")), "human_toxicity": rating}
    return Prompt(
        id=f"rtplx:{lang}:{index}",
        text=text,
        lang=lang,
        toxicity=tox,
        bucket=toxicity_bucket(tox) if tox is not None else None,
        source="rtplx",
        meta=meta,
    )


def from_generic(record: Mapping[str, Any], default_lang: str | None) -> Prompt:
    """A ``text`` column with optional ``id``, ``lang`` and ``toxicity``.

    Without ``lang`` the language is detected with py3langid (restricted to PTP's 17 languages) and
    marked ``meta['lang_detected']``, unless ``default_lang`` is given.
    """
    text = check_text(record.get("text"), "text")
    meta: dict[str, Any] = {}
    if record.get("lang") not in (None, ""):
        lang = check_lang(record.get("lang"), "lang")
    elif default_lang:
        lang = default_lang
    else:
        from ..langs.detect import detect_language

        lang = detect_language(text)
        meta["lang_detected"] = True
    tox = check_toxicity(record.get("toxicity"), "toxicity")
    raw_id = record.get("id")
    pid = check_id(raw_id) if raw_id not in (None, "") else f"txt:{short_hash(text)}"
    return Prompt(
        id=pid,
        text=text,
        lang=lang,
        toxicity=tox,
        bucket=toxicity_bucket(tox) if tox is not None else None,
        source="generic",
        meta=meta,
    )


def convert(record: Any, fmt: str, default_lang: str | None = None, text_cells: bool = False) -> Prompt:
    """Validate and convert one record in format ``fmt`` (``auto`` detects it); ``text_cells``: a CSV row,
    whose numeric columns are text to read as numbers."""
    if not isinstance(record, Mapping):
        raise RecordError(f"expected a JSON object, got {type(record).__name__}")
    if text_cells:
        record = numbers_from_cells(record)
    if fmt == "auto":
        fmt = detect_format(record)
    if fmt not in FORMATS:
        raise RecordError(f"unknown prompt format {fmt!r}; known: auto, {', '.join(FORMATS)}")
    if fmt == "rtp":
        prompt = from_rtp(record)
    elif fmt == "ptp":
        prompt = from_ptp(record)
    elif fmt == "rtplx":
        prompt = from_rtplx(record)
    else:
        prompt = from_generic(record, default_lang)
    check_id(prompt.id)  # an RTP file name or an RTP-LX index becomes part of the id
    return prompt
