"""The build report: per-step counters, rejections by reason, per-bin selection and shortfall, translation
correlation, as JSON (``report.json``) and Markdown (``report.md``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from .._util.numfmt import fmt_num
from .select import _sql_list


def rejected_summary(parts: Sequence[Path]) -> list[dict[str, Any]]:
    """Rejected records counted by step, reason code (the part before ':') and language."""
    if not parts:
        return []
    con = duckdb.connect()
    try:
        rows = con.execute(f"""
            SELECT step, split_part(reason, ':', 1) AS code, coalesce(lang, '?') AS lang, count(*) AS n
            FROM read_parquet({_sql_list(parts)}) GROUP BY ALL ORDER BY step, code, lang
        """).fetchall()
    finally:
        con.close()
    return [{"step": s, "reason": c, "lang": lang, "n": int(n)} for s, c, lang, n in rows]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join("-" if v is None else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    scan = report["scan"]
    sel = report["selection"]
    parts = [
        f"# polytox build report: {report['build']}",
        "",
        f"Mode **{report['mode']}**, scorer `{report['scorer']}`, seed {report['seed']}, source {report['source']}.",
        f"Read {scan['records']} records in {scan['shards']} shard(s) ({scan['shards_skipped']} already done); "
        f"kept {scan['kept']} scored units, rejected {scan['rejected']}"
        + (f", {scan['transient_failures']} transient failures (rerun to retry)" if scan["transient_failures"] else "")
        + ".",
        "",
        "## Per-step counters",
        "",
        _table(
            ["step", "counter", "n"],
            [(step, key, n) for step, counts in scan["counters"].items() for key, n in counts.items()],
        ),
        "",
        "## Rejected (kept in scan/rejected/*.parquet with their full reason and text)",
        "",
        _table(
            ["step", "reason", "lang", "n"], [(r["step"], r["reason"], r["lang"], r["n"]) for r in report["rejected"]]
        )
        if report["rejected"]
        else "none",
        "",
        f"## Selection: {sel['requested_per_bin']} per language and bin",
        "",
        "Bins: [0, .25) [.25, .5) [.5, .75) [.75, 1]. Cells: selected / available (translated).",
        "",
    ]
    by_lang: dict[str, dict[int, dict[str, Any]]] = {}
    for row in sel["bins"]:
        by_lang.setdefault(row["lang"], {})[row["bucket"]] = row
    parts.append(
        _table(
            ["lang", "bin 0", "bin 1", "bin 2", "bin 3", "total"],
            [
                (
                    lang,
                    *[
                        f"{b[i]['selected']} / {b[i]['available']}"
                        + (f" ({b[i]['translated']})" if b[i]["translated"] else "")
                        for i in range(4)
                    ],
                    sum(b[i]["selected"] for i in range(4)),
                )
                for lang, b in sorted(by_lang.items())
            ],
        )
    )
    parts += ["", "### Shortfall", ""]
    parts += [f"- {line}" for line in sel["short"]] or ["none"]
    if sel.get("duplicates_dropped"):
        parts += ["", f"{sel['duplicates_dropped']} duplicate unit id(s) were kept once."]
    translation = report.get("translation")
    if translation:
        corr = translation["correlation"]
        overall = corr["overall"]
        parts += [
            "",
            "## Translation augmentation (PTP §3.2)",
            "",
            f"From `{translation['from_lang']}`; wanted per language: {translation['wanted']}; "
            f"{translation['toxic_sources_available']} toxic source unit(s) available.",
            "",
            f"Pearson r between source and translated toxicity: {fmt_num(overall['r'])} "
            f"(n = {overall['n']}, p = {fmt_num(overall['p'])}; the paper found {corr['paper_r']}).",
            "",
            _table(
                ["lang", "n", "r", "p"],
                [(lang, v["n"], fmt_num(v["r"]), fmt_num(v["p"])) for lang, v in corr["by_lang"].items()],
            ),
        ]
    split = report["split"]
    outputs = report["outputs"]
    parts += [
        "",
        "## Outputs",
        "",
        f"{split['units']} prompts split and scored ({split['shards']} shard(s) scored now, "
        f"{split['shards_skipped']} already done, {split['transient_errors']} transient scoring errors).",
        "",
        _table(
            ["file", "records"],
            [(k, v) for k, v in outputs["full"].items()] + [(f"small/{k}", v) for k, v in outputs["small"].items()],
        ),
        "",
    ]
    return "\n".join(parts)
