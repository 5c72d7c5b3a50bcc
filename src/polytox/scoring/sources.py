"""One side of a comparison: a registered scorer run on the rows, or a stored reference column (``@COL``).

Used by ``polytox compare-scorers`` and ``polytox calibrate``. A row that a side cannot score keeps its
error; it is never given a value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import PolytoxError
from .score_file import ProgressCallback, score_rows
from .textio import ReferenceColumn, TextRow


@dataclass
class SideValues:
    """Values (None where missing) and errors for every row, and the side's identity."""

    label: str
    values: list[float | None]
    errors: list[str | None]

    @property
    def n_missing(self) -> int:
        return sum(v is None for v in self.values)


def is_reference(spec: str) -> bool:
    return spec.startswith("@")


def check_side(spec: str, options: Mapping[str, str]) -> None:
    """Refuse a side's unknown scorer or bad option before any side scores (a reference column is checked
    against the rows when it is read)."""
    if not is_reference(spec):
        from . import check_scorer

        check_scorer(spec, options)


def side_values(
    spec: str,
    options: Mapping[str, str],
    rows: Sequence[TextRow],
    attribute: str = "toxicity",
    progress: ProgressCallback | None = None,
) -> SideValues:
    """Values of ``attribute`` from scorer ``spec`` (with ``options``), or of reference column ``@COL``."""
    if is_reference(spec):
        ref = ReferenceColumn.parse(spec)
        pairs = [ref.value(r) if r.error is None else (None, r.error) for r in rows]
        if rows and all(v is None for v, _ in pairs):  # a misspelt column, not a few missing values
            first = next((e for _, e in pairs if e), "no value")
            raise PolytoxError(f"reference {spec}: no input row has a value for it ({first})")
        return SideValues(ref.id, [v for v, _ in pairs], [e for _, e in pairs])
    from . import build_scorer

    scorer = build_scorer(spec, options)
    try:
        scores = score_rows(scorer, rows, 0, progress)
    finally:
        scorer.close()
    values = [s.get(attribute) for s in scores]
    errors = [
        s.error if s.error else (None if v is not None else f"NO_ATTRIBUTE: {attribute}")
        for s, v in zip(scores, values, strict=True)
    ]
    return SideValues(scorer.id, values, errors)
