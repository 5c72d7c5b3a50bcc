"""OpenAI's ``POST /v1/moderations`` contract, answered by a polytox scorer.

Request: ``input`` (a string, a list of strings, or a list of ``{"type": "text", "text": ...}`` parts;
images are refused), ``model`` (accepted and ignored: the server's scorer answers). Response: ``id``,
``model`` (the scorer id), ``results[]`` with ``flagged``, ``categories``, ``category_scores`` and
``category_applied_input_types``, one per input, in order.

Only categories the scorer can honestly provide are reported: a Perspective-style attribute is reported
under the OpenAI category that means the same thing (``CATEGORY_OF``) and under its own name otherwise
(``toxicity``, ``profanity``, ...). OpenAI categories the scorer has no model for (``self-harm``,
``violence``, ``sexual/minors``, ``illicit``, ...) are absent, never reported as 0. ``flagged`` is true
when any reported score reaches the threshold (``--flag-threshold``, default 0.5, RTP's toxic cut).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..langs import UnknownLanguageError, normalize_lang
from ..scoring.base import Scorer, is_valid_unicode
from ..types import Score
from .errors import ApiError, invalid

MAX_INPUTS = 256  # texts per moderation request (the queue bound still applies)
MAX_INPUT_BYTES = 20_480 * 8  # per text; longer inputs are refused rather than cut silently
# Perspective attribute -> the OpenAI category with the same definition.
CATEGORY_OF = {
    "identity_attack": "hate",
    "insult": "harassment",
    "threat": "harassment/threatening",
    "sexually_explicit": "sexual",
}


@dataclass(frozen=True)
class ModerationRequest:
    texts: list[str]
    langs: list[str]
    model: str | None


def category_names(scorer: Scorer) -> dict[str, str]:
    """Scorer attribute -> reported category name."""
    return {a: CATEGORY_OF.get(a, a) for a in scorer.attributes}


def parse_moderation(body: Any, scorer: Scorer, detect: Any) -> ModerationRequest:
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object with an 'input' field.")
    raw = body.get("input")
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise invalid("'input' is required: a string or a non-empty list of strings.")
    if len(items) > MAX_INPUTS:
        raise invalid(f"Too many inputs: {len(items)} (at most {MAX_INPUTS} per request).")
    texts: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            if item.get("type") != "text" or not isinstance(item.get("text"), str):
                raise invalid(f"input[{i}]: only text inputs are supported (type 'text'); images are not.")
            item = item["text"]
        if not isinstance(item, str):
            raise invalid(f"input[{i}] must be a string.")
        if not item.strip():
            raise invalid(f"input[{i}] is empty: there is nothing to moderate.")
        if not is_valid_unicode(item):
            raise invalid(f"input[{i}] is not valid UTF-8 (a lone surrogate).")
        if len(item.encode("utf-8")) > MAX_INPUT_BYTES:
            raise invalid(f"input[{i}] is longer than {MAX_INPUT_BYTES} bytes.")
        texts.append(item)
    lang_opt = body.get("language")  # polytox extension: skip detection when the caller knows
    langs: list[str] = []
    for i, text in enumerate(texts):
        try:
            lang = normalize_lang(lang_opt) if isinstance(lang_opt, str) else detect(text)
        except UnknownLanguageError:
            raise invalid(f"unknown language {lang_opt!r}.") from None
        if not scorer.supports(lang):
            raise invalid(
                f"input[{i}] is in language {lang!r}, which scorer {scorer.id} does not score "
                f"(it scores: {', '.join(sorted(scorer.languages or ()))})."
            )
        langs.append(lang)
    model = body.get("model")
    return ModerationRequest(texts=texts, langs=langs, model=str(model) if model is not None else None)


def build_moderation(
    req: ModerationRequest, scores: Sequence[Score], scorer: Scorer, threshold: float
) -> dict[str, Any]:
    names = category_names(scorer)
    results = []
    for i, score in enumerate(scores):
        if not score.ok:
            code = 503 if score.transient else 400
            raise ApiError(code, f"input[{i}]: the scorer {scorer.id} failed: {score.error}")
        values = {names[a]: float(v) for a, v in (score.values or {}).items() if a in names and v is not None}
        flags = {c: v >= threshold for c, v in values.items()}
        results.append(
            {
                "flagged": any(flags.values()),
                "categories": flags,
                "category_scores": values,
                "category_applied_input_types": {c: ["text"] for c in values},
            }
        )
    return {"id": f"modr-{uuid.uuid4().hex}", "model": scorer.id, "results": results}
