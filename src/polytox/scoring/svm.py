"""The default English offline scorer: the calibrated linear SVM (TF-IDF) of ``alt-profanity-check``.

Trained on Davidson et al. and Jigsaw data; English only, so any other language is an error, never a
silently wrong score. Its probabilities are not Perspective's; ``polytox compare-scorers`` measures the
agreement and ``polytox calibrate`` maps one onto the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version as pkg_version
from typing import Any, ClassVar

from .._util.options import Option
from ..errors import require
from ..types import Score
from .base import Scorer


class SvmScorer(Scorer):
    OPTIONS: ClassVar[dict[str, Option]] = {}
    name = "svm"
    languages = frozenset({"en"})
    batch_size = 4096

    def __init__(self) -> None:
        self._module: Any = require("profanity_check", "svm")
        self.version = f"alt-profanity-check-{pkg_version('alt-profanity-check')}"

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        probs = self._module.predict_prob(list(texts))
        return [Score(values={"toxicity": float(p)}) for p in probs]
