"""Translation pairs for the non-English ridges' consistency term (``TrainConfig.consistency_weight``).

A pair is a non-English training text and its English source: the same RTP-LX ``Index`` (a translation of
a shared prompt, not a culturally specific addition) whose two mean ratings are at most ``PRESERVING``
apart, or a Parallel UD sentence and the English sentence of the same id. In a ridge each pair becomes one
*difference row*, ``x_t - x_s`` with target 0, so its objective gains ``weight * (f(t) - f(s))^2``: a
language cannot keep a level or a slope of its own that its English sources do not have
(measured, not adopted: docs/scorer-scales.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .data import EVERYDAY_DOMAIN, Example
from .scale_languages import PRESERVING

# RTP-LX (de Wynter et al. 2024), as DATA.md records it: prompts with Index >= 1000 are culturally
# specific additions per language, not translations of a shared source prompt.
CULTURAL_INDEX_START = 1000
PUD_GROUP = "ud:pud:"  # the group of a Parallel UD id and its translations (``everyday.everyday_examples``)


def translated(ex: Example) -> bool:
    """Whether ``ex`` shares its source with its group's texts in other languages: an RTP-LX translation
    (not a cultural addition) or a Parallel UD sentence."""
    if ex.source == "rtp-lx" and ex.group.startswith("lx:"):
        return int(ex.group.split(":", 1)[1]) < CULTURAL_INDEX_START
    return ex.domain == EVERYDAY_DOMAIN and ex.group.startswith(PUD_GROUP)


def _preserves(t: Example, s: Example) -> bool:
    if t.domain == EVERYDAY_DOMAIN:
        return True  # both presumed harmless
    return t.rating is not None and s.rating is not None and abs(t.rating - s.rating) <= PRESERVING


def translation_pairs(examples: Sequence[Example], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the translations, positions of their English sources), both as positions in ``rows``:
    every toxicity-preserving pair whose two texts are among ``rows``. Deterministic (``rows`` order)."""
    source: dict[str, int] = {}
    for pos, i in enumerate(rows):
        ex = examples[i]
        if ex.lang == "en" and translated(ex):
            source.setdefault(ex.group, pos)
    t_pos: list[int] = []
    s_pos: list[int] = []
    for pos, i in enumerate(rows):
        ex = examples[i]
        if ex.lang == "en" or not translated(ex):
            continue
        s = source.get(ex.group)
        if s is not None and _preserves(ex, examples[rows[s]]):
            t_pos.append(pos)
            s_pos.append(s)
    return np.asarray(t_pos, dtype=np.int64), np.asarray(s_pos, dtype=np.int64)
