"""``Run``: a run directory, read only: its manifest, spec, metrics and stored tables.

One of the two handles on a run directory: ``Run`` reads (what ``polytox.open_run`` and
``polytox.evaluate`` return, over ``store.reader.RunReader``), ``store.RunStore`` writes (the runner's).
``Run.metrics`` holds the stored metrics (``metrics.json``, or what the run just computed) and, called, is
``polytox metrics RUN``'s computation (``metrics.for_path.compute_for_path``: the same defaults, scorer
choice and scale re-reading); the tables are the stored Parquet parts in run order, as pandas DataFrames.
Nothing here writes to the directory but the numbers derived from it (``RUN/derived/``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import PolytoxError, require
from ..metrics.failures import FailureSummary
from ..metrics.settings import checked, default
from ..spec import EvalSpec, MetricsSpec
from ..store.files import slug
from ..store.reader import RunReader

if TYPE_CHECKING:
    import pandas as pd

    from ..prompts import PromptSet
    from ..runner import ExecutionReport


class Metrics(dict[str, Any]):
    """A run's metrics: the stored ones as a mapping (``run.metrics["overall"]["emt"]``); called, the
    same computed again with other settings (``run.metrics(threshold=0.3)``, ``polytox metrics RUN``)."""

    def __init__(self, run: Run, stored: dict[str, Any]) -> None:
        super().__init__(stored)
        self._run = run

    def __call__(
        self,
        scale: str | None = default("scale"),
        threshold: float = default("threshold"),
        comparison: str = default("comparison"),
        n_bootstrap: int = default("n_bootstrap"),
        scorer: str | None = default("scorer"),
        seed: int | None = default("seed"),
        attribute: str = default("attribute"),
    ) -> dict[str, Any]:
        """EMT / EP / AT of the stored scores, as ``polytox metrics RUN --json`` prints them.

        The keywords are ``polytox metrics``'s flags (``metrics.settings``: the same defaults and checks).

        Args:
            scale: re-read a ``polytox-ml`` / ``default`` run on another scale from its stored raw scores
                (``--scale``).
            threshold: the toxic threshold (``--threshold``).
            comparison: ``">="`` or ``">"`` (``--comparison``).
            n_bootstrap: bootstrap resamples of the confidence intervals (``--n-bootstrap``).
            scorer: which stored scorer; default: the run's (``--scorer``).
            seed: the bootstrap seed (``--seed``); default: the run's own seed, as in its ``metrics.json``.
            attribute: which stored attribute (``--attribute``): ``severe_toxicity``, ``insult`` ... of a run
                scored with ``attributes=rtp``; default toxicity.

        Returns:
            The metrics: ``overall``, ``by`` (language, tier, prompt toxicity...) as in ``metrics.json``.

        Raises:
            PolytoxError: no scores yet, an unknown scorer, attribute or scale, a bad setting
                (``BadValueError``, in the words of the flag's refusal).
        """
        from ..metrics.for_path import compute_for_path

        v = checked(
            {
                "scale": scale,
                "threshold": threshold,
                "comparison": comparison,
                "n_bootstrap": n_bootstrap,
                "scorer": scorer,
                "seed": seed,
                "attribute": attribute,
            }
        )
        spec = MetricsSpec(threshold=v["threshold"], comparison=v["comparison"], n_bootstrap=v["n_bootstrap"])
        return compute_for_path(
            self._run.path, spec, v["scorer"], v["seed"], scale=v["scale"], attribute=v["attribute"]
        )


class Run:
    """A run directory opened read-only (``open_run``), or the run ``evaluate`` just made or resumed (then
    ``resumed``, ``failures``, ``retry``, ``repairs`` and ``prompt_set`` say what that call did)."""

    def __init__(self, path: str | Path, report: ExecutionReport | None = None) -> None:
        self.path = Path(path)
        self._store = RunReader(self.path)
        self._report = report
        # fails in one line on a non-run directory, a damaged manifest or a damaged part (``check_readable``);
        # a run ``evaluate`` has just written and checked is not read through again
        self.manifest: dict[str, Any] = self._store.manifest() if report else self._store.check_readable()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def spec(self) -> EvalSpec:
        """The spec the run was made with."""
        return self._report.spec if self._report is not None else EvalSpec.from_dict(self.manifest["spec"])

    @cached_property
    def metrics(self) -> Metrics:
        """The run's metrics (``metrics.json``; {} before the first finish); call it to recompute them."""
        if self._report is not None:
            return Metrics(self, self._report.metrics)
        return Metrics(self, self._store.read_metrics())

    @property
    def resumed(self) -> bool:
        """Whether ``evaluate`` found the run begun (False for a run opened with ``open_run``)."""
        return bool(self._report and self._report.resumed)

    @property
    def shards_done_before(self) -> int:
        """Shards ``evaluate`` found already done (0 for a run opened with ``open_run``)."""
        return self._report.shards_done_before if self._report is not None else 0

    @property
    def failures(self) -> FailureSummary:
        """The failed samples by error kind (from the manifest for a run opened with ``open_run``)."""
        if self._report is not None:
            return self._report.failures
        from ..metrics.failures import failure_summary

        chosen = self.manifest.get("scorer", {}).get("id") or next(iter(self.scorers), None)
        return failure_summary(self._store, chosen) if chosen else FailureSummary()

    @property
    def retry(self) -> dict[str, Any] | None:
        """What ``evaluate(retry_failed=True)`` regenerated; None otherwise."""
        return self._report.retry if self._report is not None else None

    @property
    def repairs(self) -> list[str]:
        """The damaged parts ``evaluate`` removed (and made again)."""
        return list(self._report.repairs) if self._report is not None else []

    @property
    def prompt_set(self) -> PromptSet | None:
        """The prompts ``evaluate`` read, with its bad-record bookkeeping; None for ``open_run``."""
        return self._report.prompt_set if self._report is not None else None

    @property
    def scorers(self) -> list[str]:
        """The scorers with stored scores (directory names under ``scores/``)."""
        return self._store.scorer_ids()

    def compute_metrics(self, *args: Any, **settings: Any) -> dict[str, Any]:
        """Deprecated: ``run.metrics(...)`` (the same keywords, declared once there)."""
        import warnings

        warnings.warn("Run.compute_metrics is deprecated: use run.metrics(...)", DeprecationWarning, stacklevel=2)
        return self.metrics(*args, **settings)

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
