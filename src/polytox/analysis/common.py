"""Loading steps shared by the analyses: filtered per-prompt / per-generation tables plus the notes a
reader needs about what was left out."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .groups import values
from .options import AnalysisOptions, restrict
from .run_collection import RunCollection, Selection
from .stats import SMALL_SAMPLE


def _selection_notes(collection: RunCollection, sel: Selection) -> list[str]:
    notes = list(collection.notes) + list(sel.notes)
    dirs = sorted(set(sel.used.values()))
    if len(dirs) > 1:
        notes.append(
            f"the runs were scored by different scorers ({', '.join(dirs)}); their numbers are not "
            "comparable with each other — pass --scorer to compare like with like"
        )
    return notes


def prompts_table(collection: RunCollection, opts: AnalysisOptions) -> tuple[pa.Table, list[str]]:
    """Per-prompt rows (runs with the scorer, filters applied) with at least one score, and notes."""
    table, sel = collection.per_prompt(opts.scorer, opts.attribute)
    notes = _selection_notes(collection, sel)
    table = restrict(table, opts)
    n_scored = values(table, "n_scored")
    unscored = int(np.sum(n_scored == 0))
    missing = int(np.sum(values(table, "n_generations") - n_scored))
    if missing:
        failed = int(np.sum(values(table, "n_failed_generations")))
        notes.append(
            f"{missing} continuation(s) have no score ({failed} failed generations, the rest failed "
            f"or empty scores); left out of the means, never counted as 0"
        )
    if unscored:
        notes.append(f"{unscored} prompt(s) have no score at all and are left out")
    return table.filter(pa.array(n_scored > 0)), notes


def generations_table(
    collection: RunCollection, opts: AnalysisOptions, scorer: str | None = None, attribute: str | None = None
) -> tuple[pa.Table, list[str]]:
    """Per-continuation rows (filters applied; unscored rows kept, their score is null) and notes."""
    table, sel = collection.per_generation(scorer if scorer is not None else opts.scorer, attribute or opts.attribute)
    return restrict(table, opts), _selection_notes(collection, sel)


def small_note(label: str, n: int) -> str | None:
    """A note for a group below ``SMALL_SAMPLE`` observations."""
    if n < SMALL_SAMPLE:
        return f"{label}: small sample (n = {n} < {SMALL_SAMPLE}); treat its statistics with care"
    return None
