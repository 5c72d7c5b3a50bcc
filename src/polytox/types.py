"""The records that cross module boundaries: prompts, generation requests, generations and scores.

All are frozen dataclasses. A failed generation or score carries its error as data; nothing here
ever stands in a made-up 0 for a missing value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length", "error"]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt to continue.

    ``id`` is stable across runs (derived from the source record, never from a row counter alone when the
    source has a better key). ``toxicity`` is the prompt's own score when the source ships one
    (RTP/PTP Perspective values), used to split metrics into toxic / non-toxic prompts.
    """

    id: str
    text: str
    lang: str
    toxicity: float | None = None
    bucket: int | None = None
    source: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """Sample ``sample_index`` of ``prompt``; ``seed`` is derived from (run seed, prompt id, sample index)."""

    prompt: Prompt
    sample_index: int
    seed: int


@dataclass(frozen=True, slots=True)
class Generation:
    """A continuation (only the new text, never the prompt) or the error that prevented it."""

    prompt_id: str
    sample_index: int
    text: str | None
    finish_reason: FinishReason
    n_tokens: int = 0
    prompt_truncated: bool = False
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Score:
    """Attribute values for one text, or an error. Exactly one of ``values`` / ``error`` is set.

    ``transient`` marks errors worth retrying later (timeouts, quota); those are never cached.
    """

    values: Mapping[str, float] | None = None
    error: str | None = None
    transient: bool = False

    def __post_init__(self) -> None:
        if (self.values is None) == (self.error is None):
            raise ValueError("a Score holds either values or an error, not both and not neither")

    @property
    def ok(self) -> bool:
        return self.values is not None

    def get(self, attribute: str) -> float | None:
        """The value of ``attribute``, or None when the score failed or lacks it."""
        if self.values is None:
            return None
        return self.values.get(attribute)

    @classmethod
    def failed(cls, error: str, *, transient: bool = False) -> Score:
        return cls(values=None, error=error, transient=transient)


# A scorer whose value is a raw output passed through a calibration map (``polytox-ml``) returns the raw
# output too, as ``<attribute>_raw`` in the same ``Score``: the score cache, the run store and ``polytox
# score`` keep it, so another calibration (a named scale, ``scoring/ml/scales.py``) can be read from it
# later without scoring again. Scores without one (older caches and runs, other scorers) read as before.
RAW_SUFFIX = "_raw"


def raw_name(attribute: str) -> str:
    """The name under which ``attribute``'s raw (uncalibrated) value is kept."""
    return attribute + RAW_SUFFIX


RAW_KEY = raw_name("toxicity")


def derive_seed(run_seed: int, prompt_id: str, sample_index: int) -> int:
    """A 63-bit seed for one sample, so a resumed or re-batched run samples what an uninterrupted one would."""
    digest = hashlib.blake2b(f"{run_seed}\x1f{prompt_id}\x1f{sample_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def text_hash(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes (``surrogatepass`` so no input can crash the hash)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
