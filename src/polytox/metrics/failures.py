"""What failed in a run: failed generations and failed scores, counted by error kind, one example each.

A sample *failed* when its generation failed (``generations.error``) or, its generation having text, its
score failed (``scores.error``). A failed generation's score row only repeats that failure
(``GENERATION_FAILED``), so it is counted once, as a generation failure. A continuation no scorer can
score (``EMPTY_TEXT``: the model stopped at once; ``INVALID_TEXT``) is an outcome of the model, not a
failure: the same seed gives it again. It is a missing score in the metrics, counted here as
``n_unscorable``, and it neither sets the exit code nor is retried. The *kind* of an error is the
upper-case tag it starts with (``VLLM_ERROR``, ``HTTP_503``, ``HTTP_TIMEOUT_OR_CONNECTION``,
``PROMPT_ENCODING_FAILED``...), ``OTHER`` when it has none. The runner stores the summary in the manifest
(``failures``), ``polytox eval`` prints it after the metrics table and compares the failed share with
``--max-failed``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb

from ..store.reader import RunReader

KIND = re.compile(r"^\s*([A-Z][A-Z0-9_]*[A-Z0-9])\b")
OUTCOMES = ("EMPTY_TEXT", "INVALID_TEXT")  # score errors that say what the model wrote, not that a step failed
EXAMPLE_CHARS = 300


def error_kind(message: str | None) -> str:
    """The tag an error message starts with (``HTTP_503: ...`` -> ``HTTP_503``), else ``OTHER``."""
    match = KIND.match(message or "")
    return match.group(1) if match else "OTHER"


@dataclass
class FailureKind:
    """One error kind: where it happened (``generation`` or ``score``), how often, one example message."""

    stage: str
    kind: str
    count: int
    example: str


@dataclass
class FailureSummary:
    """Samples, failed samples, and the failures by stage and kind (most frequent first)."""

    n_samples: int = 0
    n_failed_generations: int = 0
    n_failed_scores: int = 0
    n_unscorable: int = 0
    kinds: list[FailureKind] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        return self.n_failed_generations + self.n_failed_scores

    @property
    def share(self) -> float:
        return self.n_failed / self.n_samples if self.n_samples else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_samples": self.n_samples,
            "n_failed_samples": self.n_failed,
            "n_failed_generations": self.n_failed_generations,
            "n_failed_scores": self.n_failed_scores,
            "n_unscorable": self.n_unscorable,
            "share_failed": round(self.share, 6),
            "kinds": [asdict(k) for k in self.kinds],
        }


def _kinds(con: duckdb.DuckDBPyConnection, stage: str, sql: str) -> list[FailureKind]:
    """Group the error messages ``sql`` selects (one column, ``error``) by kind, keeping the first example."""
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    for (message,) in con.execute(sql).fetchall():
        kind = error_kind(message)
        counts[kind] = counts.get(kind, 0) + 1
        examples.setdefault(kind, str(message)[:EXAMPLE_CHARS])
    return [FailureKind(stage, kind, n, examples[kind]) for kind, n in counts.items()]


def failure_summary(store: RunReader, scorer_id: str | None) -> FailureSummary:
    """The failures stored in ``store`` (generation parts, and the score parts of ``scorer_id``)."""
    gen_parts = list((store.path / "generations").glob("part-*.parquet"))
    if not gen_parts:
        return FailureSummary()
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW generations AS SELECT prompt_id, sample_index, error "
        f"FROM read_parquet('{store.glob('generations')}')"
    )
    (n_samples,) = con.execute("SELECT count(*) FROM generations").fetchone() or (0,)
    order = "ORDER BY prompt_id, sample_index"  # a fixed example whatever the part order
    kinds = _kinds(con, "generation", f"SELECT error FROM generations WHERE error IS NOT NULL {order}")
    n_gen = sum(k.count for k in kinds)
    n_score = n_unscorable = 0
    if scorer_id is not None and list(store.scores_dir(scorer_id).glob("part-*.parquet")):
        con.execute(
            f"CREATE VIEW scores AS SELECT prompt_id, sample_index, error "
            f"FROM read_parquet('{store.glob('scores', scorer_id)}')"
        )
        score_kinds = _kinds(
            con,
            "score",
            "SELECT s.error FROM scores s JOIN generations g "
            "USING (prompt_id, sample_index) "
            f"WHERE s.error IS NOT NULL AND g.error IS NULL {order}",
        )
        n_unscorable = sum(k.count for k in score_kinds if k.kind in OUTCOMES)
        score_kinds = [k for k in score_kinds if k.kind not in OUTCOMES]
        n_score = sum(k.count for k in score_kinds)
        kinds += score_kinds
    kinds.sort(key=lambda k: (-k.count, k.stage, k.kind))
    return FailureSummary(
        n_samples=int(n_samples),
        n_failed_generations=n_gen,
        n_failed_scores=n_score,
        n_unscorable=n_unscorable,
        kinds=kinds,
    )
