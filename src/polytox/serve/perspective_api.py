"""Perspective's ``comments:analyze`` contract (DATA.md), answered by a polytox scorer.

Request: ``comment.text`` (at most 20,480 UTF-8 bytes, else 400 ``COMMENT_TOO_LONG``), ``comment.type``
(``PLAIN_TEXT``), ``requestedAttributes`` (names the scorer provides; else ``ATTRIBUTE_NOT_SUPPORTED``; a
provided attribute the scorer does not give in the request's language: ``LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE``
naming that attribute, as Perspective answered SEXUALLY_EXPLICIT for German),
``languages`` (omitted: detected with py3langid), ``doNotStore`` (honoured by the app: such a request's
texts are scored without writing the score cache), ``spanAnnotations``, ``clientToken``,
``sessionId``, ``communityId``, ``context``.

Response: ``attributeScores.<ATTR>.summaryScore = {"value": v, "type": "PROBABILITY"}`` with the
scorer's value unrounded (so a run scored through the server equals one scored directly),
``spanScores`` (one span over the whole text; with ``spanAnnotations: true`` one per sentence, each
sentence scored on its own), ``languages``, ``detectedLanguages`` and ``clientToken``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import constants as C
from ..langs import UnknownLanguageError, normalize_lang
from ..scoring.base import Scorer, is_valid_unicode
from ..types import Score
from .errors import ApiError, invalid

# Every attribute name Perspective ever offered in production (DATA.md; RTP requests all eight).
PERSPECTIVE_ATTRIBUTES = frozenset(C.RTP_PERSPECTIVE_ATTRIBUTES)
REQUEST_FIELDS = frozenset(
    {
        "comment",
        "context",
        "requestedAttributes",
        "spanAnnotations",
        "languages",
        "doNotStore",
        "clientToken",
        "sessionId",
        "communityId",
    }
)
ATTRIBUTE_FIELDS = frozenset({"scoreType", "scoreThreshold"})  # an AttributeParameters message
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class AnalyzeRequest:
    """A validated request: what to score and how to answer."""

    text: str
    lang: str  # the language the scorer gets
    languages: list[str]  # echoed in the response
    detected: list[str]
    attributes: list[str]  # upper-case, as requested
    thresholds: dict[str, float]
    spans: list[tuple[int, int]]  # (begin, end) character offsets; one whole-text span without annotations
    client_token: str | None


def provided_attributes(scorer: Scorer) -> list[str]:
    """The Perspective attribute names the scorer can answer (its attributes, upper-cased)."""
    return [a.upper() for a in scorer.attributes]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence boundaries (after ``.!?`` and their CJK forms, at whitespace) as character offsets."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return [(b, e) for b, e in spans if text[b:e].strip()] or [(0, len(text))]


def _languages(
    body: Mapping[str, Any], text: str, scorer: Scorer, attributes: Sequence[str], detect: Any
) -> tuple[str, list[str], list[str]]:
    raw = body.get("languages")
    detected = [detect(text)]
    if raw is None or raw == []:
        wanted, echo = detected, detected
    else:
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise invalid("Invalid value at 'languages': expected a list of language codes.")
        wanted, echo = [], list(raw)
        for code in raw:
            try:
                wanted.append(normalize_lang(code))
            except UnknownLanguageError:
                raise invalid(
                    f"Attribute {attributes[0]} does not support request languages: {code}",
                    "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
                ) from None
    bad = [code for code in wanted if not scorer.supports(code)]
    if bad:
        raise invalid(
            f"Attribute {attributes[0]} does not support request languages: {','.join(bad)} "
            f"(scorer {scorer.id} scores: {', '.join(sorted(scorer.languages or ()))})",
            "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
        )
    for attr in attributes:  # per-attribute lists (Perspective: SEXUALLY_EXPLICIT in English only)
        bad = [code for code in wanted if not scorer.supports_attribute(attr.lower(), code)]
        if bad:
            raise invalid(
                f"Attribute {attr} does not support request languages: {','.join(bad)} "
                f"(scorer {scorer.id} gives {attr} in other languages only)",
                "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE",
            )
    return wanted[0], echo, detected


def _bad(field: str, kind: str, value: Any) -> ApiError:
    """Perspective's 400 for a field of the wrong type or out of its range."""
    shown = json.dumps(value, allow_nan=True)[:80] if not isinstance(value, float) or math.isfinite(value) else value
    return invalid(f"Invalid value at '{field}' ({kind}), {shown}")


def check_fields(body: Mapping[str, Any]) -> None:
    """The optional fields' types, as Perspective checks them: ``doNotStore`` and ``spanAnnotations`` booleans,
    ``clientToken``, ``sessionId`` and ``communityId`` strings, ``context.entries`` a list of
    ``{"text": str, "type": "PLAIN_TEXT"}`` objects."""
    for name in ("doNotStore", "spanAnnotations"):
        if name in body and not isinstance(body[name], bool):
            raise _bad(name, "TYPE_BOOL", body[name])
    for name in ("clientToken", "sessionId", "communityId"):
        if name in body and not isinstance(body[name], str):
            raise _bad(name, "TYPE_STRING", body[name])
    if "context" in body:
        context = body["context"]
        if not isinstance(context, dict):
            raise _bad("context", "TYPE_MESSAGE", context)
        entries = context.get("entries", [])
        if not isinstance(entries, list):
            raise _bad("context.entries", "TYPE_MESSAGE", entries)
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("text", ""), str):
                raise _bad(f"context.entries[{i}]", "TYPE_MESSAGE", entry)


def score_threshold(name: str, value: Any) -> float:
    """A ``scoreThreshold``: a finite number in [0, 1] (a number in a string too, as protobuf's JSON reads
    it); a boolean, an object, NaN or 1e999 is a 400."""
    field = f"requestedAttributes.{name}.scoreThreshold"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _bad(field, "TYPE_FLOAT", value)
    try:
        number = float(value)
    except ValueError:
        raise _bad(field, "TYPE_FLOAT", value) from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise invalid(f"Invalid value at '{field}': must be a number in [0, 1], got {value}")
    return number


def parse_analyze(
    body: Any, scorer: Scorer, detect: Any, span_annotations: bool = True, max_bytes: int = C.PERSPECTIVE_MAX_BYTES
) -> AnalyzeRequest:
    """Validate a request body as Perspective does; ``ApiError`` (400) with its reason otherwise."""
    if not isinstance(body, dict):
        raise invalid("Invalid JSON payload received. Expected an object.")
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown:
        raise invalid(f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.')
    check_fields(body)
    comment = body.get("comment")
    if not isinstance(comment, dict):
        raise invalid("comment is required.", "COMMENT_EMPTY")
    text = comment.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        raise invalid("Comment must be non-empty.", "COMMENT_EMPTY")
    if not isinstance(text, str):
        raise invalid("Invalid value at 'comment.text': expected a string.")
    if not is_valid_unicode(text):
        raise invalid("Invalid value at 'comment.text': not valid UTF-8 (a lone surrogate).")
    nbytes = len(text.encode("utf-8"))
    if nbytes > max_bytes:
        raise invalid(f"Comment text too long: {nbytes} bytes, the limit is {max_bytes} bytes.", "COMMENT_TOO_LONG")
    kind = comment.get("type", "PLAIN_TEXT")
    if kind != "PLAIN_TEXT":
        raise invalid(f"comment.type {kind!r} is not supported; send PLAIN_TEXT.")

    requested = body.get("requestedAttributes")
    if not isinstance(requested, dict) or not requested:
        raise invalid('requestedAttributes is required: e.g. {"TOXICITY": {}}.')
    have = provided_attributes(scorer)
    thresholds: dict[str, float] = {}
    for name, options in requested.items():
        if name not in have:
            what = "is not provided by" if name in PERSPECTIVE_ATTRIBUTES else "is unknown to"
            raise invalid(
                f"Attribute {name} {what} scorer {scorer.id} (it provides: {', '.join(have)}).",
                "ATTRIBUTE_NOT_SUPPORTED",
            )
        if not isinstance(options, dict):  # [] and null too: an attribute's spec is an object, {} at least
            raise invalid(f"Invalid value at 'requestedAttributes.{name}' (TYPE_MESSAGE): expected an object.")
        extra = sorted(set(options) - ATTRIBUTE_FIELDS)
        if extra:
            raise invalid(
                f'Invalid JSON payload received. Unknown name "{extra[0]}" at '
                f"'requestedAttributes.{name}': Cannot find field."
            )
        if options.get("scoreType", "PROBABILITY") != "PROBABILITY":
            raise invalid(f"scoreType {options['scoreType']!r} is not supported; only PROBABILITY.")
        if "scoreThreshold" in options:
            thresholds[name] = score_threshold(name, options["scoreThreshold"])
    attributes = list(requested)

    want_spans = body.get("spanAnnotations", False)
    if not isinstance(want_spans, bool):
        raise invalid("Invalid value at 'spanAnnotations': expected a boolean.")
    if want_spans and not span_annotations:
        raise invalid(
            "spanAnnotations is not supported by this server (it was started with "
            "--span-annotations off); send spanAnnotations: false and read summaryScore."
        )
    lang, echo, detected = _languages(body, text, scorer, attributes, detect)
    token = body.get("clientToken")
    return AnalyzeRequest(
        text=text,
        lang=lang,
        languages=echo,
        detected=detected,
        attributes=attributes,
        thresholds=thresholds,
        spans=sentence_spans(text) if want_spans else [(0, len(text))],
        client_token=str(token) if token is not None else None,
    )


def texts_to_score(req: AnalyzeRequest) -> list[str]:
    """The whole text, then each sentence when there is more than one span."""
    if len(req.spans) <= 1:
        return [req.text]
    return [req.text] + [req.text[b:e] for b, e in req.spans]


def _value(score: Score, attribute: str, scorer: Scorer) -> float:
    if not score.ok:
        if score.transient:
            raise ApiError(503, f"The scorer {scorer.id} failed on this comment (transient, retry): {score.error}")
        raise invalid(f"The scorer {scorer.id} cannot score this comment: {score.error}")
    value = score.get(attribute.lower())
    if value is None:
        raise ApiError(500, f"The scorer {scorer.id} returned no {attribute} value for this comment.")
    return float(value)


def build_response(req: AnalyzeRequest, scores: Sequence[Score], scorer: Scorer) -> dict[str, Any]:
    """The response body, from the scores of ``texts_to_score(req)`` (same order)."""
    whole, parts = scores[0], list(scores[1:])
    out: dict[str, Any] = {}
    for attr in req.attributes:
        summary = _value(whole, attr, scorer)
        if summary < req.thresholds.get(attr, float("-inf")):
            continue  # Perspective leaves out attributes scored below their scoreThreshold
        span_values = [_value(s, attr, scorer) for s in parts] if parts else [summary]
        out[attr] = {
            "spanScores": [
                {"begin": b, "end": e, "score": {"value": v, "type": "PROBABILITY"}}
                for (b, e), v in zip(req.spans, span_values, strict=True)
            ],
            "summaryScore": {"value": summary, "type": "PROBABILITY"},
        }
    body: dict[str, Any] = {"attributeScores": out, "languages": req.languages, "detectedLanguages": req.detected}
    if req.client_token is not None:
        body["clientToken"] = req.client_token
    return body
