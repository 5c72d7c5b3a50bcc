"""A deterministic fake generator, registered as a real backend, for dry runs and tests.

Text depends only on (seed, prompt): each sample draws words from a fixed vocabulary with a seeded RNG.
Model options (``--model-opt``): ``toxicity`` (share of rude words, default 0.05), ``echo`` (extra rude
share when the prompt itself is rude, default 0.3), ``fail_rate`` (share of requests that fail with an
error), ``eos_rate`` (chance to stop early), ``delay`` (seconds slept per batch, for interruption tests).

Faults that are not part of the spec (so a run that met them can be resumed or retried without them)
come from the environment, ``POLYTOX_FAKE_FAULTS="transient=0.1,fatal_after=2"``:

- ``transient=R``: a share R of the samples fail with ``FAKE_TRANSIENT: ...`` (a seeded draw of their own,
  so the same samples fail whenever the variable is set; unset it and ``--retry-failed`` recovers them
  to exactly the text an unfaulted run gives);
- ``fatal_after=N``: the generator raises ``FatalGenerationError`` (``FAKE_ENGINE_DEAD``) on every call
  after its N-th, as a dead engine does.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from .._util import ranges as R
from .._util.options import Option, with_defaults
from ..errors import FatalGenerationError, PolytoxError
from ..spec import GenerationSpec
from ..types import Generation, GenerationRequest
from .base import Generator, failed

NEUTRAL = tuple(
    "the day was long and quiet the people walked to the market with bread and tea while the ch"
    "ildren played near a small river under a bright sky friends talked about work music and books".split()
)
RUDE = ("idiot", "stupid", "moron", "dumb", "crap", "loser", "jerk", "damn")
_RUDE_RE = re.compile(r"\b(" + "|".join(RUDE) + r")\b", re.IGNORECASE)
FAULTS_ENV = "POLYTOX_FAKE_FAULTS"
TRANSIENT_STREAM = 0x7A11  # the transient draw's own RNG stream, independent of the text's


def injected_faults() -> dict[str, float]:
    """``POLYTOX_FAKE_FAULTS`` as ``{"transient": R, "fatal_after": N}`` (absent keys: no such fault)."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in os.environ.get(FAULTS_ENV, "").split(","))):
        key, _, value = item.partition("=")
        if key not in ("transient", "fatal_after"):
            raise PolytoxError(f"{FAULTS_ENV}: unknown fault {key!r} (known: transient, fatal_after)")
        try:
            out[key] = float(value)
        except ValueError as exc:
            raise PolytoxError(f"{FAULTS_ENV}: {item!r} needs a number") from exc
    return out


class FakeGenerator(Generator):
    name = "fake"
    OPTIONS: ClassVar[Mapping[str, Option]] = {
        "toxicity": Option("float", range=R.PROBABILITY, default=0.05, help="chance of a rude word"),
        "echo": Option("float", range=R.PROBABILITY, default=0.3, help="added chance after a rude prompt"),
        "fail_rate": Option("float", range=R.PROBABILITY, default=0.0, help="share of samples that fail"),
        "eos_rate": Option("float", range=R.PROBABILITY, default=0.05, help="chance of stopping at each word"),
        "delay": Option("float", range=R.NON_NEGATIVE, default=0.0, help="seconds each batch sleeps"),
    }

    def __init__(self, spec: GenerationSpec) -> None:
        opts = with_defaults(f"backend {self.name!r}", self.OPTIONS, dict(spec.options), flag="--model-opt")
        self.max_new_tokens = spec.max_new_tokens
        self.toxicity = float(opts["toxicity"])
        self.echo = float(opts["echo"])
        self.fail_rate = float(opts["fail_rate"])
        self.eos_rate = float(opts["eos_rate"])
        self.delay = float(opts["delay"])
        self.model = spec.model
        self.faults = injected_faults()
        self.calls = 0

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:
        """The options, and ``POLYTOX_FAKE_FAULTS``: a wrong entry is refused before the run folder exists."""
        super().check(spec)
        injected_faults()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model,
            "toxicity": self.toxicity,
            "echo": self.echo,
            "fail_rate": self.fail_rate,
        }

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        self.calls += 1
        if "fatal_after" in self.faults and self.calls > self.faults["fatal_after"]:
            raise FatalGenerationError("FAKE_ENGINE_DEAD: injected fatal failure (POLYTOX_FAKE_FAULTS)")
        if self.delay:
            time.sleep(self.delay)
        return [self._one(r) for r in requests]

    def _one(self, request: GenerationRequest) -> Generation:
        transient = self.faults.get("transient", 0.0)
        if transient and np.random.default_rng([TRANSIENT_STREAM, request.seed]).random() < transient:
            return failed(request, "FAKE_TRANSIENT: injected transient failure (POLYTOX_FAKE_FAULTS)")
        rng = np.random.default_rng(request.seed)
        if self.fail_rate and rng.random() < self.fail_rate:
            return failed(request, "FAKE_FAILURE: deterministic injected generation failure")
        p_rude = min(1.0, self.toxicity + (self.echo if _RUDE_RE.search(request.prompt.text) else 0.0))
        words: list[str] = []
        finish = "length"
        for _ in range(self.max_new_tokens):
            if rng.random() < self.eos_rate:
                finish = "stop"
                break
            pool = RUDE if rng.random() < p_rude else NEUTRAL
            words.append(pool[int(rng.integers(len(pool)))])
        text = (" " + " ".join(words)) if words else ""
        return Generation(
            prompt_id=request.prompt.id,
            sample_index=request.sample_index,
            text=text,
            finish_reason=finish,  # type: ignore[arg-type]
            n_tokens=len(words),
        )
