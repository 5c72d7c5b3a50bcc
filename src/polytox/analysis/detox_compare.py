"""RTP Table 3's shape for any set of runs, with DExperts' fluency and diversity columns.

One row per run: EXPECTED MAXIMUM TOXICITY (± std) and EMPIRICAL PROBABILITY on toxic and non-toxic
prompts, the overall EMT/EP, mean perplexity of the continuations under the fluency model (marked
``(first N)``, JSON ``ppl_samples_per_prompt``, when the run scored each prompt's first N only), distinct-1/2/3
and the generation time per continuation, all read from each run's ``metrics.json`` and manifest; and
each run's EMT change against the first run, paired by prompt with a 95% bootstrap interval
(``paired.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._util.numfmt import fmt_num
from ..errors import PolytoxError

COLUMNS = (
    "method",
    "model",
    "EMT toxic",
    "EMT non-toxic",
    "EP toxic",
    "EP non-toxic",
    "EMT",
    "EP",
    "ΔEMT vs first [95% CI]",
    "ΔEMT toxic",
    "ΔEMT non-toxic",
    "PPL",
    "PPL median",
    "dist-1",
    "dist-2",
    "dist-3",
    "tokens",
    "empty",
    "s/gen",
    "gens",
)


@dataclass
class DetoxRow:
    """One run's line of the comparison table (None = not measured in that run)."""

    method: str
    model: str
    run: str
    emt_toxic: float | None
    emt_toxic_std: float | None
    emt_nontoxic: float | None
    emt_nontoxic_std: float | None
    ep_toxic: float | None
    ep_nontoxic: float | None
    emt: float | None
    ep: float | None
    ppl: float | None
    ppl_median: float | None
    fluency_model: str | None
    dist_1: float | None
    dist_2: float | None
    dist_3: float | None
    seconds_per_generation: float | None
    n_generations: int
    n_failed_generations: int
    emt_delta: dict[str, Any] | None = None  # paired against the first run (paired.paired_emt_delta)
    mean_tokens: float | None = None  # continuation length: a method that stops early looks less toxic
    empty_share: float | None = None  # share of continuations with no text at all
    ppl_samples_per_prompt: int | None = None  # PPL of each prompt's first N continuations only (None = all)


def lengths(root: Path) -> tuple[float | None, float | None]:
    """Mean tokens per continuation and the share of empty continuations (failed generations left out):
    computed once per run and kept with the checksums of its generation parts (``detox.text_stats``)."""
    from ..detox.text_stats import text_stats
    from ..store.reader import RunReader

    found = text_stats(RunReader(root))["lengths"]
    return found["mean_tokens"], found["empty_share"]


def _block(metrics: dict[str, Any], group: str) -> dict[str, Any]:
    block: dict[str, Any] = metrics.get("by", {}).get("prompt_toxicity", {}).get(group, {})
    return block


def read_row(run: str | Path, label: str | None = None) -> DetoxRow:
    """The comparison row of one run directory."""
    root = Path(run)
    if not (root / "metrics.json").is_file():
        raise PolytoxError(f"{root}: no metrics.json (is it a finished polytox eval run?)")
    from ..store.reader import RunReader

    manifest, metrics = RunReader(root).summaries()  # a damaged one is one line naming the file
    tox, non = _block(metrics, "toxic"), _block(metrics, "nontoxic")
    overall = metrics.get("overall", {})
    div = metrics.get("diversity") or {}
    flu = metrics.get("fluency") or {}
    ex = manifest.get("executor") or {}
    n_gen = int(overall.get("n_generations") or 0)
    gen_s = ex.get("generate_seconds")
    mean_tokens, empty_share = lengths(root)
    return DetoxRow(
        method=label or metrics.get("detox") or "none",
        model=str(metrics.get("model")),
        run=str(root),
        emt_toxic=tox.get("emt"),
        emt_toxic_std=tox.get("emt_std"),
        emt_nontoxic=non.get("emt"),
        emt_nontoxic_std=non.get("emt_std"),
        ep_toxic=tox.get("ep"),
        ep_nontoxic=non.get("ep"),
        emt=overall.get("emt"),
        ep=overall.get("ep"),
        ppl=flu.get("mean_ppl"),
        ppl_median=flu.get("median_ppl"),
        fluency_model=flu.get("model"),
        dist_1=div.get("dist_1"),
        dist_2=div.get("dist_2"),
        dist_3=div.get("dist_3"),
        seconds_per_generation=(gen_s / n_gen)
        if gen_s and n_gen and ex.get("shards_generated") == ex.get("shards_total")
        else None,
        n_generations=n_gen,
        n_failed_generations=int(overall.get("n_failed_generations") or 0),
        mean_tokens=mean_tokens,
        empty_share=empty_share,
        ppl_samples_per_prompt=flu.get("samples_per_prompt"),
    )


def compare(
    runs: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    maxima: Mapping[str, dict[str, float]] | None = None,
) -> list[DetoxRow]:
    """The rows of ``runs``, each with its EMT change against the first run. ``maxima``: per-prompt maximum
    toxicities already read (``str(run)`` -> ``paired.prompt_max_toxicity``); a run not in it is read
    once here, not once per pair, and not at all when its pair's result is kept (``paired_emt_delta``).
    The pairs' bootstraps run on a small thread pool (each has its own seeded generator, so the result
    does not depend on the pool)."""
    if labels and len(labels) != len(runs):
        raise PolytoxError(f"{len(labels)} labels for {len(runs)} runs")
    rows = [read_row(r, labels[i] if labels else None) for i, r in enumerate(runs)]
    if len(rows) < 2:
        return rows
    from .paired import MaximaOnce, paired_emt_delta

    known = MaximaOnce(maxima)  # each run read once, and only for a pair not kept from an earlier call
    reference = str(Path(runs[0]))
    workers = min(4, os.cpu_count() or 1, len(rows) - 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        deltas = list(pool.map(lambda row: paired_emt_delta(reference, row.run, maxima=known), rows[1:]))
    for row, delta in zip(rows[1:], deltas, strict=True):
        row.emt_delta = delta
    return rows


def _pm(v: float | None, s: float | None) -> str:
    return "-" if v is None else f"{v:.3f}" + ("" if s is None else f" ± {s:.2f}")


def _delta(d: dict[str, Any] | None, group: str | None = None) -> str:
    if d is not None and group is not None:
        d = d.get("by_group", {}).get(group)
    return "-" if d is None else f"{d['delta']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"


def _ppl(v: float | None, samples: int | None) -> str:
    """A perplexity cell; ``(first N)`` when it covers only each prompt's first N continuations."""
    return fmt_num(v, 1) + (f" (first {samples})" if samples and v is not None else "")


def cells(row: DetoxRow) -> list[str]:
    n = row.ppl_samples_per_prompt
    return [
        row.method,
        row.model,
        _pm(row.emt_toxic, row.emt_toxic_std),
        _pm(row.emt_nontoxic, row.emt_nontoxic_std),
        fmt_num(row.ep_toxic),
        fmt_num(row.ep_nontoxic),
        fmt_num(row.emt),
        fmt_num(row.ep),
        _delta(row.emt_delta),
        _delta(row.emt_delta, "toxic"),
        _delta(row.emt_delta, "nontoxic"),
        _ppl(row.ppl, n),
        _ppl(row.ppl_median, n),
        fmt_num(row.dist_1),
        fmt_num(row.dist_2),
        fmt_num(row.dist_3),
        fmt_num(row.mean_tokens, 1),
        fmt_num(row.empty_share),
        fmt_num(row.seconds_per_generation, 3),
        str(row.n_generations),
    ]


def markdown(rows: Sequence[DetoxRow]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * len(COLUMNS)) + "|"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def detox_table(runs: Sequence[str | Path], maxima: Mapping[str, dict[str, float]] | None = None) -> Any:
    """The comparison as a report ``Table`` when any run has fluency/diversity metrics, else None.
    ``maxima``: per-prompt maxima the caller has already read (``compare``)."""
    from ..store.reader import RunReader
    from .result import Table

    with_metrics = []
    for run in runs:
        if "diversity" in RunReader(run).summaries()[1]:
            with_metrics.append(run)
    if not with_metrics:
        return None
    rows = compare(with_metrics, maxima=maxima)
    for row in rows:
        if row.method != "none":
            from ..detox.methods import short_label

            row.method = short_label(row.method)
    return Table.build(
        "detox",
        "Detoxification: toxicity, fluency and diversity (RTP Table 3 shape)",
        COLUMNS,
        [cells(r) for r in rows],
        caption="EMT (± std) and EP by prompt toxicity over each prompt's continuations; PPL = "
        "mean perplexity of the continuations under the run's fluency model (first N: of "
        "each prompt's first N continuations only, --fluency-samples); dist-n = "
        "distinct n-grams per word (DExperts); ΔEMT = change against the first run, "
        "paired by prompt, 95% bootstrap interval (same K only), overall and on toxic / "
        "non-toxic prompts",
    )


def to_json(rows: Sequence[DetoxRow]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]
