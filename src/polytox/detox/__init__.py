"""Detoxification methods of RTP §5 and DExperts, with their fluency and diversity cost.

Decoding-time methods (word filter, VOCAB-SHIFT, DExperts, ATCON's attribute token, PPLM) are
``LogitsAdjuster`` objects that the transformers backend calls where logits become tokens; data-based
methods (DAPT, ATCON, DExperts' experts, VOCAB-SHIFT's projection, PPLM's head) are trained by
``polytox detox train``. ``fluency`` and ``diversity`` measure what detoxification costs. Importing the
package registers its hooks (``hooks``), through which the spec and the generation backends reach it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr
from . import hooks  # noqa: F401  (registers the detox.* hooks the spec and the generation backends call)

if TYPE_CHECKING:
    from .base import LogitsAdjuster
    from .fluency import PerplexityScorer, score_fluency
    from .methods import build_adjuster, canonical_detox, parse_detox
    from .train import TrainConfig

__all__ = [
    "LogitsAdjuster",
    "PerplexityScorer",
    "TrainConfig",
    "build_adjuster",
    "canonical_detox",
    "parse_detox",
    "score_fluency",
]

__getattr__ = lazy_getattr(
    __name__,
    {
        "LogitsAdjuster": ".base",
        "PerplexityScorer": ".fluency",
        "score_fluency": ".fluency",
        "build_adjuster": ".methods",
        "canonical_detox": ".methods",
        "parse_detox": ".methods",
        "TrainConfig": ".train",
    },
)
