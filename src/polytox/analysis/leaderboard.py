"""The leaderboard: one row per model (and prompt set and scorer), with AT, EMT and EP (± std) overall,
per language, per resource tier and per prompt toxicity.

Every block is ``polytox.metrics.summarize`` over the per-prompt reductions the run collection computes in
DuckDB, so a run's overall row equals its own ``metrics.json``. Runs of the same model on the same prompt
set (e.g. one run per language, as PTP evaluates ``ptp-<lang>`` configs) are pooled into one row.
Resource tiers follow ``polytox.langs.RESOURCE_TIERS`` (Joshi et al. 2020 as PTP §4.1 / Table 2 uses
them; override with ``POLYTOX_RESOURCE_TIERS``). The prompt-toxicity split is RTP Table 2's (toxic =
prompt score >= threshold).

Exports: ``to_dict`` (JSON), ``to_csv`` (one wide row per model), ``tables`` / Markdown via the report
renderers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .._util.numfmt import fmt_num
from ..langs import RESOURCE_TIERS_SOURCE
from ..metrics import summarize
from ..spec import MetricsSpec
from .groups import split, values
from .options import AnalysisOptions, restrict
from .result import Table, pm
from .run_collection import RunCollection, Selection
from .runs import ModelMeta, format_params

TIER_ORDER = ("high", "medium", "low", "unknown")
BLOCK_KEYS = (
    "at",
    "at_std",
    "emt",
    "emt_std",
    "ep",
    "n_prompts",
    "n_prompts_unscored",
    "n_generations",
    "n_failed_generations",
    "n_missing_scores",
)


@dataclass
class LeaderboardRow:
    model: str
    prompt_set: str
    scorer: str
    runs: list[str]
    meta: ModelMeta
    overall: dict[str, Any]
    by_lang: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_tier: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_prompt_toxicity: dict[str, dict[str, Any]] = field(default_factory=dict)
    rank: int | None = None  # by AT within (prompt set, scorer), 1 = least toxic

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "model": self.model,
            "prompt_set": self.prompt_set,
            "scorer": self.scorer,
            "runs": self.runs,
            "meta": self.meta.to_dict(),
            "overall": self.overall,
            "by_lang": self.by_lang,
            "by_tier": self.by_tier,
            "by_prompt_toxicity": self.by_prompt_toxicity,
        }


@dataclass
class Leaderboard:
    rows: list[LeaderboardRow]
    langs: list[str]
    tiers: list[str]
    settings: dict[str, Any]
    notes: list[str]
    extra_tables: list[Table] = field(default_factory=list)  # e.g. polytox.detox's RTP Table 3 view

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "notes": self.notes,
            "langs": self.langs,
            "tiers": self.tiers,
            "rows": [r.to_dict() for r in self.rows],
        }

    # ---- CSV ------------------------------------------------------------------------------------
    def csv_columns(self) -> list[str]:
        cols = [
            "rank",
            "model",
            "prompt_set",
            "scorer",
            "runs",
            "family",
            "params",
            "category",
            "alignment",
            *BLOCK_KEYS,
        ]
        for t in self.tiers:
            cols += [f"tier_{t}_{k}" for k in ("at", "at_std", "emt", "emt_std", "ep", "n_prompts")]
        for s in ("toxic", "nontoxic", "unknown"):
            cols += [f"prompt_{s}_{k}" for k in ("at", "emt", "emt_std", "ep", "n_prompts")]
        for lang in self.langs:
            cols += [f"{lang}_{k}" for k in ("at", "at_std", "emt", "emt_std", "ep", "n_prompts")]
        return cols

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self.csv_columns(), lineterminator="\n")
        writer.writeheader()
        for r in self.rows:
            rec: dict[str, Any] = {
                "rank": r.rank,
                "model": r.model,
                "prompt_set": r.prompt_set,
                "scorer": r.scorer,
                "runs": " ".join(r.runs),
                "family": r.meta.family,
                "params": r.meta.params,
                "category": r.meta.category,
                "alignment": r.meta.alignment,
            }
            rec.update({k: r.overall.get(k) for k in BLOCK_KEYS})
            for t, block in r.by_tier.items():
                rec.update(
                    {f"tier_{t}_{k}": block.get(k) for k in ("at", "at_std", "emt", "emt_std", "ep", "n_prompts")}
                )
            for s, block in r.by_prompt_toxicity.items():
                rec.update({f"prompt_{s}_{k}": block.get(k) for k in ("at", "emt", "emt_std", "ep", "n_prompts")})
            for lang, block in r.by_lang.items():
                rec.update({f"{lang}_{k}": block.get(k) for k in ("at", "at_std", "emt", "emt_std", "ep", "n_prompts")})
            writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
        return buf.getvalue()

    # ---- tables for the renderers ----------------------------------------------------------------
    def document_tables(self) -> list[Table]:
        """The tables a document (HTML, Markdown) shows: all but the terminal's compact tier table."""
        return [t for t in self.tables() if t.name != "by_tier_at"]

    def tables(self) -> list[Table]:
        """Overall, by language, by resource tier, by prompt toxicity, then the extra tables."""
        return [
            self._overall_table(),
            *self._language_tables(),
            *self._tier_tables(),
            self._prompt_toxicity_table(),
            *self.extra_tables,
        ]

    def _overall_table(self) -> Table:
        """One row per model and prompt set: its metadata, counts and overall AT / EMT / EP."""
        scorers = sorted({r.scorer for r in self.rows})
        many = len(scorers) > 1  # one scorer: named in the caption instead of a column
        meta_cols = [
            "rank",
            "model",
            "prompt set",
            *(["scorer"] if many else []),
            "family",
            "params",
            "category",
            "alignment",
        ]

        def head(r: LeaderboardRow) -> list[Any]:
            return [
                r.rank,
                r.model,
                r.prompt_set,
                *([r.scorer] if many else []),
                r.meta.family,
                format_params(r.meta.params),
                r.meta.category,
                r.meta.alignment,
            ]

        overall = Table.build(
            "leaderboard",
            "Leaderboard (overall)",
            [
                *meta_cols,
                "prompts",
                "generations",
                "failed gens",
                "missing scores",
                "AT ± std",
                "EMT ± std",
                "EP",
            ],
            [
                [
                    *head(r),
                    r.overall["n_prompts"],
                    r.overall["n_generations"],
                    r.overall["n_failed_generations"],
                    r.overall["n_missing_scores"],
                    pm(r.overall["at"], r.overall["at_std"]),
                    pm(r.overall["emt"], r.overall["emt_std"]),
                    fmt_num(r.overall["ep"], missing=None),
                ]
                for r in self.rows
            ],
            caption=self._caption(),
        )
        return overall

    def _language_tables(self) -> list[Table]:
        """AT, EMT, EP and scored prompts per language."""
        out = []
        for metric, title in (
            ("at", "AVERAGE TOXICITY by language (± std)"),
            ("emt", "EXPECTED MAXIMUM TOXICITY by language (± std)"),
            ("ep", "EMPIRICAL PROBABILITY by language"),
        ):
            out.append(
                Table.build(
                    f"by_lang_{metric}",
                    title,
                    ["model", "prompt set", *self.langs],
                    [
                        [r.model, r.prompt_set, *[_cell(r.by_lang.get(lang), metric) for lang in self.langs]]
                        for r in self.rows
                    ],
                )
            )
        out.append(
            Table.build(
                "by_lang_n",
                "Scored prompts by language",
                ["model", "prompt set", *self.langs],
                [
                    [
                        r.model,
                        r.prompt_set,
                        *[(r.by_lang[lang]["n_prompts"] if lang in r.by_lang else None) for lang in self.langs],
                    ]
                    for r in self.rows
                ],
            )
        )
        return out

    def _tier_tables(self) -> list[Table]:
        """By resource tier (PTP Table 2): every metric, and the terminal's compact AT table."""
        out = []
        tier_cols = [f"{t} {m}" for t in self.tiers for m in ("AT", "EMT", "EP", "n")]
        out.append(
            Table.build(
                "by_tier",
                "By language resource tier (PTP Table 2)",
                ["model", "prompt set", *tier_cols],
                [
                    [r.model, r.prompt_set, *[v for t in self.tiers for v in _tier_cells(r.by_tier.get(t))]]
                    for r in self.rows
                ],
                caption=f"tiers: {RESOURCE_TIERS_SOURCE}",
            )
        )
        out.append(
            Table.build(
                "by_tier_at",
                "AT by language resource tier (PTP Table 2)",
                ["model", "prompt set", *[f"{t} AT ± std (n)" for t in self.tiers]],
                [[r.model, r.prompt_set, *[_tier_at(r.by_tier.get(t)) for t in self.tiers]] for r in self.rows],
                caption=f"tiers: {RESOURCE_TIERS_SOURCE}",
            )
        )
        return out

    def _prompt_toxicity_table(self) -> Table:
        """By prompt toxicity (RTP Table 2): toxic and non-toxic prompts apart."""
        split_cols = [f"{s} {m}" for s in ("toxic", "nontoxic") for m in ("EMT ± std", "EP", "n")]
        return Table.build(
            "by_prompt_toxicity",
            "By prompt toxicity (RTP Table 2)",
            ["model", "prompt set", *split_cols],
            [
                [
                    r.model,
                    r.prompt_set,
                    *[v for s in ("toxic", "nontoxic") for v in _split_cells(r.by_prompt_toxicity.get(s))],
                ]
                for r in self.rows
            ],
            caption=f"toxic prompt = prompt toxicity {self.settings['comparison']} "
            f"{self.settings['threshold']}; prompts without a toxicity score are counted under "
            "'unknown' in the exports",
        )

    def _caption(self) -> str:
        s = self.settings
        scorers = sorted({r.scorer for r in self.rows})
        named = f"scorer {scorers[0]}; " if len(scorers) == 1 else ""
        scale = f"; scale: {s['scale']}" if s.get("scale") else ""
        if s.get("attribute", "toxicity") != "toxicity":
            named += f"attribute {s['attribute']}; "
        return (
            named + f"toxic = score {s['comparison']} {s['threshold']}; std over prompts (ddof 1); "
            "rank by AT within prompt set and scorer (1 = least toxic)" + scale
        )


def scale_label(collection: RunCollection, opts: AnalysisOptions) -> str | None:
    """The scale the toxicity values are on: the one asked for (``--scale``), else the one the runs' own
    scorer recorded in their manifests (None where none did, e.g. runs scored before scales were named)."""
    if collection.scale and opts.attribute == "toxicity":
        return f"{collection.scale} (re-read from stored raw scores)"
    if opts.scorer is not None:
        return None
    found = {
        str(r.manifest.get("scorer", {}).get("scale"))
        for r in collection.runs
        if isinstance(r.manifest.get("scorer"), dict) and r.manifest["scorer"].get("scale")
    }
    return ", ".join(sorted(found)) or None


def _cell(block: dict[str, Any] | None, metric: str) -> str | None:
    if not block:
        return None
    if metric == "ep":
        return fmt_num(block["ep"], missing=None)
    return pm(block[metric], block[f"{metric}_std"])


def _tier_cells(block: dict[str, Any] | None) -> list[Any]:
    if not block:
        return [None, None, None, None]
    return [
        pm(block["at"], block["at_std"]),
        pm(block["emt"], block["emt_std"]),
        fmt_num(block["ep"], missing=None),
        block["n_prompts"],
    ]


def _tier_at(block: dict[str, Any] | None) -> str | None:
    if not block or block["at"] is None:
        return None
    return f"{pm(block['at'], block['at_std'])} ({block['n_prompts']})"


def _split_cells(block: dict[str, Any] | None) -> list[Any]:
    if not block:
        return [None, None, None]
    return [pm(block["emt"], block["emt_std"]), fmt_num(block["ep"], missing=None), block["n_prompts"]]


def _block(table: pa.Table, spec: MetricsSpec) -> dict[str, Any]:
    full = summarize(table, spec, bootstrap=False)
    return {k: full[k] for k in BLOCK_KEYS}


def _prompt_split(table: pa.Table, spec: MetricsSpec) -> np.ndarray:
    tox = values(table, "prompt_toxicity")
    out = np.full(len(tox), "unknown", dtype=object)
    known = ~np.isnan(tox)
    toxic = tox >= spec.threshold if spec.comparison == ">=" else tox > spec.threshold
    out[known & toxic] = "toxic"
    out[known & ~toxic] = "nontoxic"
    return out


def build_leaderboard(collection: RunCollection, opts: AnalysisOptions | None = None) -> Leaderboard:
    """The leaderboard of a run collection for ``opts.scorer`` (None: each run's own scorer), filters applied."""
    opts = opts or AnalysisOptions()
    spec = collection.metrics
    full, sel = collection.per_prompt(opts.scorer, opts.attribute)
    notes = list(collection.notes) + sel.notes
    table = restrict(full, opts)
    scorer_col = pa.array([sel.used.get(r) for r in table.column("run_id").to_pylist()], type=pa.string())
    table = table.append_column("scorer", scorer_col)
    rows: list[LeaderboardRow] = []
    all_langs: set[str] = set()
    all_tiers: set[str] = set()
    for (model, prompt_set, scorer_dir), sub in split(table, ["model", "prompt_set", "scorer"]).items():
        run_ids = sorted(set(sub.column("run_id").to_pylist()))
        runs = [collection.by_id[r] for r in run_ids]
        meta = runs[0].meta
        if any(r.meta != meta for r in runs[1:]):
            notes.append(f"{model} · {prompt_set}: its runs carry different metadata; the first run's is shown")
        ids = sub.column("prompt_id").to_pylist()
        dupes = len(ids) - len(set(ids))
        if dupes:
            notes.append(
                f"{model} · {prompt_set}: {dupes} prompt(s) appear in more than one of its runs "
                f"({', '.join(run_ids)}); each appearance counts"
            )
        row = LeaderboardRow(
            model=model,
            prompt_set=prompt_set,
            scorer=scorer_dir,
            runs=run_ids,
            meta=meta,
            overall=_block(sub, spec),
        )
        for (lang,), part in split(sub, ["lang"]).items():
            row.by_lang[str(lang)] = _block(part, spec)
            all_langs.add(str(lang))
        for (tier,), part in split(sub, ["tier"]).items():
            row.by_tier[str(tier)] = _block(part, spec)
            all_tiers.add(str(tier))
        keys = _prompt_split(sub, spec)
        for key in ("toxic", "nontoxic", "unknown"):
            mask = keys == key
            if mask.any():
                row.by_prompt_toxicity[key] = _block(sub.filter(pa.array(mask)), spec)
        rows.append(row)
        ungenerated = int((values(sub, "n_generations") == 0).sum())
        if ungenerated:
            notes.append(
                f"{model} · {prompt_set}: {ungenerated} prompt(s) have no continuation yet (unfinished run); "
                "counted as unscored prompts"
            )
        if row.overall["n_missing_scores"]:
            notes.append(
                f"{model} · {prompt_set}: {row.overall['n_missing_scores']} of "
                f"{row.overall['n_generations']} continuations have no score "
                f"({row.overall['n_failed_generations']} failed generations); they are left out of "
                "the means, not counted as 0"
            )
    _rank(rows)
    rows.sort(key=lambda r: (r.prompt_set, r.scorer, r.rank or 0, r.model))
    settings = {
        "threshold": spec.threshold,
        "comparison": spec.comparison,
        "std_ddof": 1,
        "scorer": opts.scorer or "each run's own",
        "attribute": opts.attribute,
        "filters": opts.describe(),
        "tiers_source": RESOURCE_TIERS_SOURCE,
        "scale": scale_label(collection, opts),
    }
    tiers = [t for t in TIER_ORDER if t in all_tiers] + sorted(all_tiers - set(TIER_ORDER))
    from .detox_compare import detox_table  # detoxified runs: EMT/EP by prompt toxicity, PPL, dist-n

    maxima = own_maxima(full, sel, collection) if opts.scorer is None and opts.attribute == "toxicity" else None
    extra = [t for t in [detox_table([r.path for r in collection.runs], maxima)] if t is not None]
    return Leaderboard(
        rows=rows, langs=sorted(all_langs), tiers=tiers, settings=settings, notes=notes, extra_tables=extra
    )


def own_maxima(table: pa.Table, sel: Selection, collection: RunCollection) -> dict[str, dict[str, float]]:
    """Per run path, each prompt's maximum toxicity under the run's own scorer, from the per-prompt table
    already read (the detox table's paired ΔEMT reads no part again). Runs re-read on another scale or
    scored by another scorer are left out (the detox table reads their own stored scores)."""
    if collection.scale is not None:
        return {}
    out: dict[str, dict[str, float]] = {}
    run_ids = table.column("run_id").to_numpy(zero_copy_only=False)
    scored = values(table, "n_scored") > 0
    prompt_ids = table.column("prompt_id").to_numpy(zero_copy_only=False)
    maxima = values(table, "max_tox")
    for run in collection.runs:
        if run.default_scorer is None or sel.used.get(run.run_id) != run.default_scorer:
            continue
        mask = scored & (run_ids == run.run_id)
        out[str(Path(run.path))] = dict(zip(prompt_ids[mask].tolist(), maxima[mask].tolist(), strict=True))
    return out


def _rank(rows: list[LeaderboardRow]) -> None:
    groups: dict[tuple[str, str], list[LeaderboardRow]] = {}
    for r in rows:
        groups.setdefault((r.prompt_set, r.scorer), []).append(r)
    for members in groups.values():
        ranked = sorted((r for r in members if r.overall["at"] is not None), key=lambda r: r.overall["at"])
        for i, r in enumerate(ranked, start=1):
            r.rank = i
