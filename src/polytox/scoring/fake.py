"""A deterministic fake scorer, registered like any other, for tests and dry runs.

The value depends only on the text: a hash gives a low baseline, and a few rude words push it up, so
fake "models" that swear more score higher. Options make failures reproducible: ``fail_rate`` turns a
hash-chosen share of texts into permanent errors, ``crash_on`` makes a batch containing that substring
raise (a scorer crashing part-way), ``delay`` sleeps that many seconds per batch (a stand-in for a
classifier's or an API's latency, for pipelining tests and benchmarks).

``attributes`` takes the Perspective scorer's syntax (``ptp``, ``rtp`` or a comma list, any case; toxicity
always first), so every path that carries several attributes is tested offline with real values: each
attribute other than toxicity adds its own hash-derived offset. ``attr_langs`` limits single
attributes to some languages (``sexually_explicit:en;flirtation:en`` gives Perspective's English-only
pair), for the per-attribute language checks.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from typing import ClassVar

from .._util import ranges as R
from .._util.options import Option
from ..types import Score
from .base import Scorer, config_digest
from .perspective import parse_attributes

RUDE = re.compile(r"\b(idiot|stupid|moron|dumb|shut up|crap|hate|damn|loser|jerk)\b", re.IGNORECASE)


def _unit(text: str, salt: str = "") -> float:
    digest = hashlib.blake2b((salt + text).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def parse_attribute_languages(value: str) -> dict[str, frozenset[str]]:
    """``"sexually_explicit:en;flirtation:en,de"`` -> ``{attribute: languages}`` (lower-case attributes)."""
    out: dict[str, frozenset[str]] = {}
    for item in value.split(";"):
        if not item.strip():
            continue
        attr, sep, langs = item.partition(":")
        if not sep or not attr.strip():
            raise ValueError(f"attr_langs: expected ATTR:lang,lang, got {item.strip()!r}")
        out[attr.strip().lower()] = frozenset(x.strip() for x in langs.split(",") if x.strip())
    return out


class FakeScorer(Scorer):
    OPTIONS: ClassVar[dict[str, Option]] = {
        "attributes": Option(
            "str", default="toxicity", help="attributes it scores: ptp, rtp or a comma list (toxicity always)"
        ),
        "languages": Option("str", default="any", help="comma-separated languages it supports (any: all)"),
        "attr_langs": Option("str", default="", help="ATTR:lang,lang;ATTR:lang - attributes limited to languages"),
        "fail_rate": Option("float", range=R.PROBABILITY, default=0.0, help="share of texts whose scoring fails"),
        "crash_on": Option("str", default="", help="a word whose texts make the whole batch raise"),
        "batch_size": Option("int", range=R.COUNT, default=64, help="texts per batch"),
        "version": Option("str", default="1", help="scorer version (a new version misses the cache)"),
        "delay": Option("float", range=R.NON_NEGATIVE, default=0.0, help="seconds each batch sleeps"),
    }
    name = "fake"

    def __init__(
        self,
        attributes: str = OPTIONS["attributes"].default,
        languages: str = OPTIONS["languages"].default,
        attr_langs: str = OPTIONS["attr_langs"].default,
        fail_rate: str | float = OPTIONS["fail_rate"].default,
        crash_on: str = OPTIONS["crash_on"].default,
        batch_size: str | int = OPTIONS["batch_size"].default,
        version: str = OPTIONS["version"].default,
        delay: str | float = OPTIONS["delay"].default,
    ) -> None:
        self.attributes = tuple(a.lower() for a in parse_attributes(attributes))
        self.languages = None if languages == "any" else frozenset(x.strip() for x in languages.split(","))
        self.attribute_languages = parse_attribute_languages(attr_langs)
        self.fail_rate = float(fail_rate)
        self.crash_on = crash_on
        self.batch_size = int(batch_size)
        self.delay = float(delay)
        self.version = f"{version}-{config_digest(self._digest_fields())}"

    def _digest_fields(self) -> dict[str, object]:
        fields: dict[str, object] = {"a": self.attributes, "f": self.fail_rate}
        if self.attribute_languages:  # only when set: the ids of existing fake runs stay as they were
            fields["al"] = {a: sorted(v) for a, v in sorted(self.attribute_languages.items())}
        return fields

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        limited = self.attribute_languages.get(attribute.lower())
        return super().supports_attribute(attribute, lang) and (limited is None or lang in limited)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        if self.delay:
            time.sleep(self.delay)
        if self.crash_on and any(self.crash_on in t for t in texts):
            raise RuntimeError(f"fake scorer crashed on {self.crash_on!r}")
        out = []
        for text, lang in zip(texts, langs, strict=True):
            if self.fail_rate and _unit(text, "fail") < self.fail_rate:
                out.append(Score.failed("FAKE_FAILURE: deterministic injected failure"))
                continue
            rude = len(RUDE.findall(text))
            base = _unit(text) ** 3 * 0.5
            values = {
                a: min(1.0, base + 0.3 * rude + (_unit(text, a) * 0.05 if a != "toxicity" else 0.0))
                for a in self.attributes
                if self.supports_attribute(a, lang)  # an attribute limited to other languages: no value
            }
            out.append(Score(values=values))
        return out
