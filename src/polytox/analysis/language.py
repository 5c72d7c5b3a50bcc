"""Language: AVERAGE TOXICITY per language per model (PTP Figure 3) and by resource tier (PTP Table 2).

Per-cell AT ± std comes from the leaderboard blocks (the same per-prompt reduction as ``metrics.json``).
The tier contrasts pool every model's per-prompt AT within a tier and compare tiers pairwise with
Cohen's d and Welch's t-test — PTP's claim is that "AT reduces as the availability of language
resources increases".
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from .._util.numfmt import fmt_num
from .common import prompts_table, small_note
from .groups import split, values
from .leaderboard import TIER_ORDER, Leaderboard, build_leaderboard
from .options import AnalysisOptions
from .result import AnalysisResult, Table, pm
from .run_collection import RunCollection
from .stats import cohen_d, describe, welch_t


def analyze(collection: RunCollection, opts: AnalysisOptions) -> AnalysisResult:
    board = build_leaderboard(collection, opts)
    res = AnalysisResult(
        key="language",
        title="Toxicity by language and resource tier",
        reference="PTP §4.1, Figure 3 and Table 2",
        notes=opts.describe() + board.notes,
    )
    res.tables += board_tables(board)
    res.notes += board_notes(board)
    res.tables += tier_contrast_tables(collection, opts)
    res.data = plot_data(board)
    return res


def board_tables(board: Leaderboard) -> list[Table]:
    """AT and scored prompts per language per model, and AT / EP by resource tier (PTP Table 2)."""
    tables: list[Table] = []
    langs = board.langs
    tables.append(
        Table.build(
            "at_by_lang",
            "AT per language per model (± std)",
            ["model", "prompt set", *langs],
            [
                [
                    r.model,
                    r.prompt_set,
                    *[pm(r.by_lang[lg]["at"], r.by_lang[lg]["at_std"]) if lg in r.by_lang else None for lg in langs],
                ]
                for r in board.rows
            ],
        )
    )
    tables.append(
        Table.build(
            "n_by_lang",
            "Scored prompts per language per model",
            ["model", "prompt set", *langs],
            [
                [
                    r.model,
                    r.prompt_set,
                    *[r.by_lang[lg]["n_prompts"] if lg in r.by_lang else None for lg in langs],
                ]
                for r in board.rows
            ],
        )
    )
    tiers = board.tiers
    tables.append(
        Table.build(
            "at_by_tier",
            "AT and EP by language resource tier (PTP Table 2)",
            ["model", "prompt set", *[f"{t} {m}" for t in tiers for m in ("AT ± std", "EP", "n")]],
            [
                [
                    r.model,
                    r.prompt_set,
                    *[
                        v
                        for t in tiers
                        for v in (
                            (
                                pm(r.by_tier[t]["at"], r.by_tier[t]["at_std"]),
                                fmt_num(r.by_tier[t]["ep"], missing=None),
                                r.by_tier[t]["n_prompts"],
                            )
                            if t in r.by_tier
                            else (None, None, None)
                        )
                    ],
                ]
                for r in board.rows
            ],
            caption=board.settings["tiers_source"],
        )
    )
    return tables


def board_notes(board: Leaderboard) -> list[str]:
    """Small-sample warnings per model and language, and languages without a resource tier."""
    notes: list[str] = []
    for r in board.rows:
        for lg, block in r.by_lang.items():
            note = small_note(f"{r.model} · {r.prompt_set} · {lg}", block["n_prompts"])
            if note:
                notes.append(note)
    if "unknown" in board.tiers:
        notes.append(
            "some languages have no resource tier in the mapping (shown as 'unknown'); set "
            "POLYTOX_RESOURCE_TIERS to classify them"
        )

    return notes


def tier_contrast_tables(collection: RunCollection, opts: AnalysisOptions) -> list[Table]:
    """Tier contrasts: every model's per-prompt AT pooled within a tier, then Cohen's d and Welch's t."""
    tables: list[Table] = []
    table, _ = prompts_table(collection, opts)
    pooled = {t: values(sub, "mean_tox") for (t,), sub in split(table, ["tier"]).items()}
    ordered = [t for t in TIER_ORDER if t in pooled] + sorted(set(pooled) - set(TIER_ORDER))
    summary_rows = []
    for t in ordered:
        s = describe(pooled[t])
        summary_rows.append([t, s.n, pm(s.mean, s.std)])
    tables.append(
        Table.build("tier_pooled", "AT by tier, all models pooled", ["tier", "prompts", "AT ± std"], summary_rows)
    )
    contrast_rows = []
    for a, b in combinations(ordered, 2):
        test = welch_t(pooled[a], pooled[b])
        contrast_rows.append(
            [
                a,
                b,
                len(pooled[a]),
                len(pooled[b]),
                cohen_d(pooled[a], pooled[b]),
                test.t if test else None,
                test.p if test else None,
            ]
        )
    if contrast_rows:
        tables.append(
            Table.build(
                "tier_contrasts",
                "Tier contrasts (Cohen's d of AT, Welch's t-test)",
                ["tier A", "tier B", "n A", "n B", "d (A − B)", "t", "p"],
                contrast_rows,
                caption="d > 0: tier A more toxic; per-prompt AT pooled over models",
            )
        )
    return tables


def plot_data(board: Leaderboard) -> dict[str, Any]:
    """AT per language and per tier of each model, for the report's plots."""
    langs, tiers = board.langs, board.tiers
    data: dict[str, Any] = {
        "langs": langs,
        "tiers": tiers,
        "series": [
            {
                "label": f"{r.model} · {r.prompt_set}",
                "at": [r.by_lang[lg]["at"] if lg in r.by_lang else None for lg in langs],
                "tier_at": [r.by_tier[t]["at"] if t in r.by_tier else None for t in tiers],
            }
            for r in board.rows
        ],
    }
    return data
