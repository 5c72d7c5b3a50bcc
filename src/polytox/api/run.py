"""``polytox.open_run``: a run directory, read only: its manifest, spec, metrics and stored tables.

``Run.metrics`` is ``polytox metrics RUN``'s computation (``cli.metrics_cmd.compute_for_path``: the same
defaults, scorer choice and scale re-reading); the tables are the stored Parquet parts in run order, as
pandas DataFrames. Nothing here writes to the directory.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import constants as C
from ..errors import PolytoxError, require
from ..spec import EvalSpec, MetricsSpec
from ..store import RunStore, slug

if TYPE_CHECKING:
    import pandas as pd


class Run:
    """A run directory opened read-only (``open_run``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store = RunStore(self.path)
        # fails in one line on a non-run directory, a damaged manifest or a damaged part (``check_readable``)
        self.manifest: dict[str, Any] = self._store.check_readable()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def spec(self) -> EvalSpec:
        """The spec the run was made with."""
        return EvalSpec.from_dict(self.manifest["spec"])

    @property
    def scorers(self) -> list[str]:
        """The scorers with stored scores (directory names under ``scores/``)."""
        return self._store.scorer_ids()

    def metrics(
        self,
        scale: str | None = None,
        threshold: float = C.TOXIC_THRESHOLD,
        comparison: str = C.DEFAULT_COMPARISON,
        n_bootstrap: int = C.BOOTSTRAP_RESAMPLES,
        scorer: str | None = None,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """EMT / EP / AT of the stored scores, as ``polytox metrics RUN --json`` prints them.

        Args:
            scale: re-read a ``polytox-ml`` / ``default`` run on another scale from its stored raw scores
                (``--scale``).
            threshold: the toxic threshold (``--threshold``).
            comparison: ``">="`` or ``">"`` (``--comparison``).
            n_bootstrap: bootstrap resamples of the confidence intervals (``--n-bootstrap``).
            scorer: which stored scorer; default: the run's (``--scorer``).
            seed: the bootstrap seed (``--seed``); default: the run's own seed, as in its ``metrics.json``.

        Returns:
            The metrics: ``overall``, ``by`` (language, tier, prompt toxicity...) as in ``metrics.json``.

        Raises:
            PolytoxError: no scores yet, an unknown scorer or scale, a bad setting.
        """
        from ..cli.metrics_cmd import compute_for_path

        spec = MetricsSpec(threshold=threshold, comparison=comparison, n_bootstrap=n_bootstrap)
        if comparison not in C.COMPARISONS or not 0 <= threshold <= 1 or n_bootstrap < 0:
            raise PolytoxError(
                f"metrics: threshold must be in [0, 1], comparison one of {C.COMPARISONS} and "
                f"n_bootstrap >= 0; got {threshold}, {comparison!r}, {n_bootstrap}"
            )
        return compute_for_path(self.path, spec, scorer, seed, scale=scale)

    def prompts(self) -> pd.DataFrame:
        """The run's prompts: ``id``, ``text``, ``lang``, ``toxicity`` ... as stored in ``prompts.parquet``."""
        return _frame([self._store.prompts_path])

    def generations(self) -> pd.DataFrame:
        """One row per stored continuation: ``prompt_id``, ``sample_index``, ``text``, ``finish_reason``,
        ``n_tokens``, ``prompt_truncated``, ``error`` (a failed generation keeps its error, text null)."""
        return _frame(sorted((self.path / "generations").glob("part-*.parquet")))

    def scores(self, scorer: str | None = None) -> pd.DataFrame:
        """One row per scored continuation: ``prompt_id``, ``sample_index``, the scorer's attributes
        (``toxicity``...; ``toxicity_raw`` where kept) and ``error`` (a failed score keeps its error).

        Args:
            scorer: which stored scorer; default: the run's.

        Returns:
            The stored scores, in run order.
        """
        chosen = scorer or self.manifest.get("scorer", {}).get("id") or next(iter(self.scorers), None)
        if chosen is None or slug(chosen) not in self.scorers:
            have = ", ".join(self.scorers) or "none"
            raise PolytoxError(f"{self.path} has no scores of {chosen!r}; it has: {have}")
        return _frame(sorted(self._store.scores_dir(chosen).glob("part-*.parquet")))


def _frame(paths: list[Path]) -> pd.DataFrame:
    """The Parquet files concatenated in order, as one DataFrame (an empty one when there are none)."""
    require("pandas", "", "pandas")
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p) for p in paths if p.exists()]
    if not tables:
        import pandas as pd

        return pd.DataFrame()
    return pa.concat_tables(tables, promote_options="default").to_pandas()


def open_run(path: str | Path) -> Run:
    """Open a run directory read-only.

    Args:
        path: the run directory (what ``evaluate`` / ``polytox eval --out`` wrote).

    Returns:
        A ``Run``: ``.manifest``, ``.spec``, ``.metrics()``, ``.prompts()``, ``.generations()``, ``.scores()``.

    Raises:
        PolytoxError: ``path`` is not a run directory.
    """
    return Run(path)
