"""The options every analysis accepts, and the row filters they imply."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse: which stored scorer (and attribute), and which languages, models and prompt sets.

    ``scorer=None`` uses each run's own scorer. ``scorer_b``/``attribute_b`` name the second scorer of
    the scorer-agreement analysis (PTP §4.4: a toxicity scorer against a safety judge). ``top`` bounds
    listed examples; ``ks`` the K values of "EMT vs K" (empty: 1..K).
    """

    scorer: str | None = None
    attribute: str = "toxicity"
    langs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    prompt_sets: tuple[str, ...] = ()
    scorer_b: str | None = None
    attribute_b: str = "toxicity"
    top: int = 10
    ks: tuple[int, ...] = ()

    def describe(self) -> list[str]:
        """Human-readable filter notes for a result."""
        out = []
        if self.langs:
            out.append(f"languages: {', '.join(self.langs)}")
        if self.models:
            out.append(f"models: {', '.join(self.models)}")
        if self.prompt_sets:
            out.append(f"prompt sets: {', '.join(self.prompt_sets)}")
        return out


def restrict(table: pa.Table, opts: AnalysisOptions) -> pa.Table:
    """Keep the rows matching the language / model / prompt-set filters."""
    for column, wanted in (("lang", opts.langs), ("model", opts.models), ("prompt_set", opts.prompt_sets)):
        if wanted:
            keep = set(wanted)
            table = table.filter(pa.array([v in keep for v in table.column(column).to_pylist()], type=pa.bool_()))
    return table
