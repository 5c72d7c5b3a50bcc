"""``polytox.scorer``: a handle that keeps one scorer loaded for a ``with`` block.

``polytox.score`` keeps its scorers for the whole process (``api.scorers``); a handle owns its own, built
when the handle is made and closed when the block ends, for code that wants the memory back when done.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import PolytoxError
from ..spec import DEFAULT_SCORER
from .scorers import Options, normalise_options
from .texts import ScoredText, score_with

if TYPE_CHECKING:
    from ..scoring.base import Scorer


class ScorerHandle:
    """One loaded scorer, scored through as often as needed: ``with polytox.scorer("default") as s:``.

    The handle builds its scorer when it is made and closes it on leaving the ``with`` block (or on
    ``close()``); it does not share it with ``polytox.score``. ``score`` takes what ``polytox.score`` takes,
    less the scorer, and gives the same values."""

    def __init__(self, name: str = DEFAULT_SCORER, options: Options | None = None) -> None:
        from ..scoring import build_scorer

        self.name = name
        self.options = normalise_options(options)
        self._scorer: Scorer | None = build_scorer(name, dict(self.options))
        self.id = self._scorer.id

    @property
    def scorer(self) -> Scorer:
        """The built scorer; a closed handle raises ``PolytoxError``."""
        if self._scorer is None:
            raise PolytoxError(f"scorer handle {self.id!r} is closed")
        return self._scorer

    def score(self, texts: Sequence[str], langs: str | Sequence[str | None] | None = None) -> list[ScoredText]:
        """One ``ScoredText`` per text, in order, as ``polytox.score(texts, name, langs, options)``."""
        return score_with(self.scorer, texts, langs)

    def describe(self) -> dict[str, Any]:
        """What a run's manifest records about this scorer (id, attributes, scale, ...)."""
        return self.scorer.describe()

    def close(self) -> None:
        """Release the scorer's model; later ``score`` calls raise."""
        built, self._scorer = self._scorer, None
        if built is not None:
            built.close()

    def __enter__(self) -> ScorerHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._scorer is None else "open"
        return f"ScorerHandle({self.id!r}, {state})"


def scorer(name: str = DEFAULT_SCORER, options: Options | None = None) -> ScorerHandle:
    """A ``ScorerHandle``: ``name`` and ``options`` as in ``polytox.score``; the model loads once, here.

    Raises:
        PolytoxError: an unknown scorer or option, with the line ``polytox score`` prints.
    """
    return ScorerHandle(name, options)
