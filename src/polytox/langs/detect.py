"""Language identification with py3langid, restricted to PTP's 17 languages.

Restricting matters: unrestricted, Indonesian is often read as Malay (DATA.md).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import require
from . import PTP_LANGUAGES


@lru_cache(maxsize=1)
def _identifier() -> Any:
    module = require("py3langid.langid", "", "py3langid")
    # py3langid >= 0.3 loads its model with ``from_model_file`` (``from_pickled_model`` was langid.py's).
    ident = module.LanguageIdentifier.from_model_file(module.MODEL_FILE, norm_probs=True)
    ident.set_languages(list(PTP_LANGUAGES))
    return ident


def detect_language(text: str) -> str:
    """The most likely of PTP's 17 languages for ``text``."""
    lang, _prob = _identifier().classify(text)
    return str(lang)
