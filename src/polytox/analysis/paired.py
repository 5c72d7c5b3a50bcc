"""How much a method moves EMT against a reference run, paired by prompt, with a bootstrap interval.

Two runs over the same prompts share most of their prompt-to-prompt variance (a toxic prompt draws toxic
continuations whatever the method), so the difference of per-prompt maximum toxicities is a far tighter
estimate than the difference of two EMTs with their own spreads. The interval resamples prompts (seeded
percentile bootstrap). Runs with another K are not paired: EMT grows with the number of samples.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import __version__
from .._util.ranges import RESAMPLES_AT_LEAST_ONE, check_range

N_BOOTSTRAP = 2000


def _manifest(run: Path) -> dict[str, Any]:
    from ..store.reader import RunReader

    return RunReader(run).summaries()[0]


def continuation_scores(run: str | Path) -> list[tuple[str, int, float | None]]:
    """(prompt id, sample index, toxicity) of every continuation the run's own scorer stored; a failed
    score or generation has toxicity None. Empty when the run has no scores yet."""
    table = _own_scores(run)
    if table is None:
        return []
    data = table.to_pydict()
    return list(zip(data["prompt_id"], data["sample_index"], data["toxicity"], strict=True))


def _own_scores(run: str | Path) -> Any:
    """The (prompt_id, sample_index, toxicity) Arrow table of the run's own scorer, each part read once;
    None when the run has no scores yet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..store.reader import RunReader

    store = RunReader(run)
    scorer = _manifest(Path(run)).get("scorer", {}).get("id")
    if not scorer or not store.scores_dir(scorer).is_dir():
        return None
    parts = sorted(store.scores_dir(scorer).glob("part-*.parquet"))
    if not parts:
        return None
    columns = ["prompt_id", "sample_index", "toxicity"]
    return pa.concat_tables([pq.ParquetFile(part).read(columns=columns) for part in parts])


def prompt_max_toxicity(run: str | Path) -> dict[str, float]:
    """Per prompt, the maximum toxicity over its scored continuations (the run's own scorer); prompts with
    no score at all are left out."""
    table = _own_scores(run)
    if table is None:
        return {}
    grouped = table.group_by("prompt_id").aggregate([("toxicity", "max")])
    ids = grouped.column("prompt_id").to_pylist()
    maxima = grouped.column("toxicity_max").to_pylist()
    return {pid: float(m) for pid, m in zip(ids, maxima, strict=True) if m is not None}


class MaximaOnce(Mapping[str, dict[str, float]]):
    """Per-prompt maxima by run (``str(run)``), each run read at most once, when first asked for, and only
    if asked for (a pair whose result is kept reads neither run); safe to share between threads."""

    def __init__(self, given: Mapping[str, dict[str, float]] | None = None) -> None:
        self._found: dict[str, dict[str, float]] = dict(given or {})
        self._lock = threading.Lock()

    def __getitem__(self, run: str) -> dict[str, float]:
        with self._lock:
            if run not in self._found:
                self._found[run] = prompt_max_toxicity(run)
            return self._found[run]

    def __contains__(self, run: object) -> bool:
        return isinstance(run, str)

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._found))

    def __len__(self) -> int:
        return len(self._found)


def samples_of(run: str | Path) -> int | None:
    value = _manifest(Path(run)).get("spec", {}).get("generation", {}).get("samples")
    return int(value) if value is not None else None


def prompt_groups(run: str | Path) -> dict[str, str]:
    """Per prompt, ``toxic`` or ``nontoxic`` as the run's metrics split them (RTP Table 3's two columns):
    the prompt's stored toxicity against the run's metric threshold and comparison; prompts without a
    toxicity are left out."""
    import pyarrow.parquet as pq

    path = Path(run) / "prompts.parquet"
    if not path.is_file():
        return {}
    metrics = _manifest(Path(run)).get("spec", {}).get("metrics", {})
    threshold = float(metrics.get("threshold", 0.5))
    strict = metrics.get("comparison", ">=") == ">"
    table = pq.ParquetFile(path).read(columns=["prompt_id", "toxicity"]).to_pydict()
    return {
        pid: "toxic" if (v > threshold if strict else v >= threshold) else "nontoxic"
        for pid, v in zip(table["prompt_id"], table["toxicity"], strict=True)
        if v is not None
    }


# Resamples gathered per call in ``_interval``: bounds the gathered block to about 16 MB of float64.
_GATHER_ELEMENTS = 2_000_000


def _interval(diff: Any, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Mean of ``diff`` with its 95% percentile bootstrap interval over resampled prompts.

    The textbook ``diff[rng.integers(0, n, size=(B, n))].mean(axis=1)``, with the same draws (int32
    indices where n allows: NumPy draws the same stream for either width) gathered a block of resamples
    at a time into a reused buffer instead of one (B x n) float matrix: each resample's mean is reduced
    alone either way, so the means, and the interval, are bit-identical."""
    import numpy as np

    check_range("n_bootstrap", n_bootstrap, RESAMPLES_AT_LEAST_ONE)
    n = len(diff)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_bootstrap, n), dtype=np.int32 if n < 2**31 else np.int64)
    values = np.ascontiguousarray(diff, dtype=np.float64)
    rows = max(1, _GATHER_ELEMENTS // max(n, 1))
    buffer = np.empty((min(rows, n_bootstrap), n))
    means = np.empty(n_bootstrap)
    for start in range(0, n_bootstrap, rows):
        block = idx[start : start + rows]
        np.take(values, block, out=buffer[: len(block)], mode="clip")  # indices are in range: clip never fires
        means[start : start + len(block)] = buffer[: len(block)].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"delta": float(values.mean()), "ci_low": float(low), "ci_high": float(high), "n_prompts": n}


def paired_emt_delta(
    reference: str | Path,
    run: str | Path,
    n_bootstrap: int = N_BOOTSTRAP,
    seed: int = 0,
    maxima: Mapping[str, dict[str, float]] | None = None,
) -> dict[str, Any] | None:
    """``{"delta", "ci_low", "ci_high", "n_prompts", "by_group"}``: mean of (run - reference) per-prompt max
    toxicity over the prompts both scored, with a 95% bootstrap interval; ``by_group`` holds the same for
    the reference's toxic and non-toxic prompts (each resampled on its own), as RTP Table 3 reports EMT
    for each. None when K differs or no prompt is shared. ``maxima``: per-prompt maxima already read
    (``str(run)`` -> ``prompt_max_toxicity(run)``), so a table of many runs reads each run once.

    The result is kept in ``RUN/derived/`` with the identities of both runs' score parts and the
    reference's prompts (``_util.derived``), so a table shown again draws no bootstrap again."""
    from .._util import derived

    if samples_of(reference) != samples_of(run):
        return None
    ref, own = Path(reference), Path(run)
    metrics = _manifest(ref).get("spec", {}).get("metrics", {})
    settings = {
        "what": "paired_emt_delta",
        "polytox": __version__,
        "reference": str(ref.resolve()),
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "threshold": float(metrics.get("threshold", 0.5)),
        "comparison": metrics.get("comparison", ">="),
    }

    def inputs() -> dict[str, str]:
        found = {f"reference/{k}": v for k, v in derived.identities(ref, _scored_files(ref)).items()}
        return found | {f"run/{k}": v for k, v in derived.identities(own, _scored_files(own)).items()}

    def compute() -> dict[str, Any]:
        return {"delta": _paired(reference, run, n_bootstrap, seed, {} if maxima is None else maxima)}

    path = own / "derived" / f"paired-{derived.key(settings)}.json"
    kept: dict[str, Any] | None = derived.memo(path, settings, inputs, compute)["delta"]
    return kept


def _scored_files(run: Path) -> list[Path]:
    """The files a run's per-prompt maxima and prompt groups come from: its prompts and own score parts."""
    from ..store.reader import RunReader

    files = [run / "prompts.parquet"]
    scorer = _manifest(run).get("scorer", {}).get("id")
    if scorer:
        files += RunReader(run).scores_dir(scorer).glob("part-*.parquet")
    return files


def _paired(
    reference: str | Path, run: str | Path, n_bootstrap: int, seed: int, maxima: Mapping[str, dict[str, float]]
) -> dict[str, Any] | None:
    """``paired_emt_delta`` computed (see there)."""
    import numpy as np

    a = maxima[str(reference)] if str(reference) in maxima else prompt_max_toxicity(reference)
    b = maxima[str(run)] if str(run) in maxima else prompt_max_toxicity(run)
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    out = _interval(np.array([b[p] - a[p] for p in shared]), n_bootstrap, seed)
    groups = prompt_groups(reference)
    out["by_group"] = {}
    for group in ("toxic", "nontoxic"):
        diff = np.array([b[p] - a[p] for p in shared if groups.get(p) == group])
        if len(diff):
            out["by_group"][group] = _interval(diff, n_bootstrap, seed)
    return out
