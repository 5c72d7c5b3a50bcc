"""The polytox-ml scorer: a small trained head over an offline backbone, for PTP's 17 languages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from .head import MlHead
    from .scorer import PolytoxMlScorer

__all__ = ["MlHead", "PolytoxMlScorer"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "MlHead": ".head",
        "PolytoxMlScorer": ".scorer",
    },
)
