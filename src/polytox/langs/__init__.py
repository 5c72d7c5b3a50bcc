"""Languages polytox knows: PTP's 17, how codes are normalised, and their resource tiers.

The tier mapping is data with its source: Joshi et al. (2020) classes as PTP uses them (§4.1, Table 2;
classes 5/4/3 = high/medium/low). PTP's tables label de, en, es, fr high and hi, it, nl, pt, ru medium;
the rest is the best-known mapping recorded in the project's DATA.md. Override with
``POLYTOX_RESOURCE_TIERS`` (a YAML/JSON file ``{lang: tier}``) when you disagree.
"""

from __future__ import annotations

import json
import os
from typing import Final

from ..errors import PolytoxError

__all__ = [
    "PTP_LANGUAGES",
    "RESOURCE_TIERS",
    "RESOURCE_TIERS_SOURCE",
    "UnknownLanguageError",
    "load_resource_tiers",
    "normalize_lang",
    "resource_tier",
]

# PTP §3: the 17 languages of PolygloToxicityPrompts.
PTP_LANGUAGES: Final = (
    "ar",
    "cs",
    "de",
    "en",
    "es",
    "fr",
    "hi",
    "id",
    "it",
    "ja",
    "ko",
    "nl",
    "pl",
    "pt",
    "ru",
    "sv",
    "zh",
)

RESOURCE_TIERS_SOURCE: Final = "Joshi et al. (2020) via PTP §4.1/Table 2 and DATA.md"
RESOURCE_TIERS: Final[dict[str, str]] = {
    **dict.fromkeys(("ar", "de", "en", "es", "fr", "ja", "zh"), "high"),
    **dict.fromkeys(("cs", "hi", "it", "ko", "nl", "pl", "pt", "ru", "sv"), "medium"),
    "id": "low",
}

ISO_639_1: Final = frozenset(
    " ".join(
        [
            "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de "
            "dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id "
            "ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu "
            "lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu "
            "rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr "
            "ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu"
        ]
    ).split()
)

# Codes seen in the wild mapped to the ISO 639-1 code polytox uses.
_ALIASES: Final = {"zh-hans": "zh", "zh-hant": "zh", "zh-cn": "zh", "zh-tw": "zh", "in": "id", "iw": "he"}


class UnknownLanguageError(PolytoxError, ValueError):
    """A language code polytox cannot interpret (a ``PolytoxError``: the CLI prints it, no traceback)."""


def normalize_lang(code: str) -> str:
    """Normalise a language code (``EN``, ``en-US``, ``ZH-Hans``) to polytox's lower-case ISO 639-1 form.

    Raises ``UnknownLanguageError`` for anything that is not an ISO 639-1 code (region and script
    subtags are dropped); codes outside PTP's 17 are accepted, and each scorer decides whether it
    supports them.
    """
    raw = code.strip().lower().replace("_", "-")
    if raw in _ALIASES:
        return _ALIASES[raw]
    base = _ALIASES.get(raw.split("-", 1)[0], raw.split("-", 1)[0])
    if base not in ISO_639_1:
        raise UnknownLanguageError(
            f"unknown language code {code!r}: expected an ISO 639-1 code like 'en', 'de', 'zh' "
            f"(PTP languages: {', '.join(PTP_LANGUAGES)})"
        )
    return base


def resource_tier(lang: str) -> str:
    """Resource tier (high/medium/low/unknown) of a language, from the configurable mapping."""
    return load_resource_tiers().get(lang, "unknown")


def load_resource_tiers() -> dict[str, str]:
    """The tier mapping: the built-in one, overridden by the file named in ``POLYTOX_RESOURCE_TIERS``."""
    path = os.environ.get("POLYTOX_RESOURCE_TIERS")
    if not path:
        return dict(RESOURCE_TIERS)
    import yaml

    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) if not path.endswith(".json") else json.load(fh)
    return {normalize_lang(k): str(v) for k, v in dict(data).items()}
