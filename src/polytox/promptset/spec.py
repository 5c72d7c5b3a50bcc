"""The build spec: everything that determines a built prompt set, as frozen dataclasses.

Its hash guards resume, as an evaluation's does: a build directory is only continued by the spec that
created it. Defaults follow the papers: PTP mode takes 6,250 documents per bin and language (PTP §3.2),
RTP mode 25,000 sentences per bin (RTP §4.1); the small subset has 5,000 prompts per language (PTP_SMALL).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .. import constants as C
from ..errors import PolytoxError
from .langcheck import POLICIES
from .readers import CorpusSource, FieldMap

MODES = ("ptp", "rtp")


@dataclass(frozen=True)
class TranslateSpec:
    """Translation augmentation (PTP §3.2): toxic ``from_lang`` units into languages short of toxic data.

    ``to_langs`` empty means every language with a shortfall in the toxic bins (>= 0.5).
    ``max_per_lang`` caps the translations per target language (0 = the toxic shortfall).
    """

    model: str = C.PTP_TRANSLATION_MODEL
    from_lang: str = "en"
    to_langs: tuple[str, ...] = ()
    max_per_lang: int = 0
    batch_size: int = 8
    max_new_tokens: int = 256
    num_beams: int = 1
    device: str = "auto"


@dataclass(frozen=True)
class BuildSpec:
    source: CorpusSource = field(default_factory=CorpusSource)
    fields: FieldMap = field(default_factory=FieldMap)
    mode: str = "ptp"
    langs: tuple[str, ...] = ()
    lang_policy: str = "drop"
    scorer: str = "svm"
    scorer_options: tuple[tuple[str, str], ...] = ()
    per_bin: int | None = None  # None: the paper's number for the mode
    small_per_lang: int = C.PTP_SMALL_PER_LANG
    seed: int = 0
    shard_size: int = 1000
    score_batch_size: int = 256
    max_bytes: int = C.PERSPECTIVE_MAX_BYTES
    span_min_chars: int = C.RTP_SPAN_MIN_CHARS
    span_max_chars: int = C.RTP_SPAN_MAX_CHARS
    prompt_max_tokens: int = C.RTP_PROMPT_MAX_TOKENS
    translate: TranslateSpec | None = None

    @property
    def bin_size(self) -> int:
        if self.per_bin is not None:
            return self.per_bin
        return C.PTP_DOCS_PER_BIN if self.mode == "ptp" else C.RTP_SENTENCES_PER_BIN

    def validate(self) -> BuildSpec:
        checks = [
            (self.mode in MODES, f"mode must be one of {', '.join(MODES)}, got {self.mode!r}"),
            (self.lang_policy in POLICIES, f"lang policy must be one of {', '.join(POLICIES)}"),
            (self.bin_size >= 1, f"per_bin must be >= 1, got {self.bin_size}"),
            (self.small_per_lang >= 0, f"small_per_lang must be >= 0, got {self.small_per_lang}"),
            (self.shard_size >= 1, f"shard_size must be >= 1, got {self.shard_size}"),
            (self.score_batch_size >= 1, "score_batch_size must be >= 1"),
            (self.max_bytes >= 1, "max_bytes must be >= 1"),
            (0 < self.span_min_chars <= self.span_max_chars, "need 0 < span_min_chars <= span_max_chars"),
            (self.prompt_max_tokens >= 1, "prompt_max_tokens must be >= 1"),
            (self.source.limit is None or self.source.limit >= 1, "limit must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise PolytoxError(f"invalid build spec: {message}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def spec_hash(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
