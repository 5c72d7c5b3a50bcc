"""A deterministic fake scorer, registered like any other, for tests and dry runs.

The value depends only on the text: a hash gives a low baseline, and a few rude words push it up, so
fake "models" that swear more score higher. Options make failures reproducible: ``fail_rate`` turns a
hash-chosen share of texts into permanent errors, ``crash_on`` makes a batch containing that substring
raise (a scorer crashing part-way), ``delay`` sleeps that many seconds per batch (a stand-in for a
classifier's or an API's latency, for pipelining tests and benchmarks).
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

RUDE = re.compile(r"\b(idiot|stupid|moron|dumb|shut up|crap|hate|damn|loser|jerk)\b", re.IGNORECASE)


def _unit(text: str, salt: str = "") -> float:
    digest = hashlib.blake2b((salt + text).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class FakeScorer(Scorer):
    OPTIONS: ClassVar[dict[str, Option]] = {
        "attributes": Option("str", help="comma-separated attributes it scores"),
        "languages": Option("str", help="comma-separated languages it supports (any: all)"),
        "fail_rate": Option("float", range=R.PROBABILITY, help="share of texts whose scoring fails"),
        "crash_on": Option("str", help="a word whose texts make the whole batch raise"),
        "batch_size": Option("int", range=R.COUNT, help="texts per batch"),
        "version": Option("str", help="scorer version (a new version misses the cache)"),
        "delay": Option("float", range=R.NON_NEGATIVE, help="seconds each batch sleeps"),
    }
    name = "fake"

    def __init__(
        self,
        attributes: str = "toxicity",
        languages: str = "any",
        fail_rate: str | float = 0.0,
        crash_on: str = "",
        batch_size: str | int = 64,
        version: str = "1",
        delay: str | float = 0.0,
    ) -> None:
        self.attributes = tuple(a.strip().lower() for a in attributes.split(",") if a.strip())
        self.languages = None if languages == "any" else frozenset(x.strip() for x in languages.split(","))
        self.fail_rate = float(fail_rate)
        self.crash_on = crash_on
        self.batch_size = int(batch_size)
        self.delay = float(delay)
        self.version = f"{version}-{config_digest({'a': self.attributes, 'f': self.fail_rate})}"

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        if self.delay:
            time.sleep(self.delay)
        if self.crash_on and any(self.crash_on in t for t in texts):
            raise RuntimeError(f"fake scorer crashed on {self.crash_on!r}")
        out = []
        for text in texts:
            if self.fail_rate and _unit(text, "fail") < self.fail_rate:
                out.append(Score.failed("FAKE_FAILURE: deterministic injected failure"))
                continue
            rude = len(RUDE.findall(text))
            base = _unit(text) ** 3 * 0.5
            values = {
                a: min(1.0, base + 0.3 * rude + (_unit(text, a) * 0.05 if a != "toxicity" else 0.0))
                for a in self.attributes
            }
            out.append(Score(values=values))
        return out
