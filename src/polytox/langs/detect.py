"""Language identification with py3langid: PTP's 17 languages, and texts confidently in another one.

Restricting to the 17 matters: unrestricted, Indonesian is often read as Malay (DATA.md). But a restricted
identifier reads every text as one of the 17, so a Swahili sentence became Indonesian and got a number on
Indonesian's scale. ``detect_language`` therefore asks the unrestricted identifier first and returns its
language when it is outside the 17 with probability at least ``UNSUPPORTED_CONFIDENCE``; every caller then
treats that code as unsupported (a missing score with its reason, a 400 from ``polytox serve``). Otherwise it
returns the most likely of the 17.

On the shared RTP-LX texts (12,824 texts in the 17 languages) no text reaches that confidence in another
language (the most confident miss is Malay for Indonesian at 0.8), so no supported text is refused.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import require
from . import PTP_LANGUAGES

# A text is read as outside the 17 only when the unrestricted identifier is this sure (normalised over its
# languages); below it, the most likely of the 17 is returned, as before.
UNSUPPORTED_CONFIDENCE = 0.9


@lru_cache(maxsize=2)
def _identifier(restricted: bool) -> Any:
    module = require("py3langid.langid", "", "py3langid")
    # py3langid >= 0.3 loads its model with ``from_model_file`` (``from_pickled_model`` was langid.py's).
    ident = module.LanguageIdentifier.from_model_file(module.MODEL_FILE, norm_probs=True)
    if restricted:
        ident.set_languages(list(PTP_LANGUAGES))
    return ident


def detect_language(text: str) -> str:
    """The language of ``text``: the most likely of PTP's 17, or another language's code when the text is
    confidently in that language (``UNSUPPORTED_CONFIDENCE``)."""
    lang, prob = _identifier(False).classify(text)
    if lang not in PTP_LANGUAGES and prob >= UNSUPPORTED_CONFIDENCE:
        return str(lang)
    lang, _prob = _identifier(True).classify(text)
    return str(lang)


def detect_ptp_language(text: str) -> tuple[str, float]:
    """(the most likely of PTP's 17 languages, its probability among them)."""
    lang, prob = _identifier(True).classify(text)
    return str(lang), float(prob)
