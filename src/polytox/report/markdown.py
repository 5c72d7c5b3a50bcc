"""The report (and any analysis table) as GitHub-flavoured Markdown.

Model-written strings are made inert: ``<``, ``>`` and ``&`` become entities (Markdown renderers pass raw
HTML through), Markdown's own syntax characters are backslash-escaped, and ``|`` / newlines cannot break
a table row. Plots are written as PNG files beside the Markdown and linked relatively.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from .._util.atomic import atomic_write
from ..analysis.result import AnalysisResult, Table
from .build import Report
from .cells import format_cell

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!~|])")
MAX_TEXT = 300


def md_escape(value: object) -> str:
    """Text safe inside a Markdown table cell: no raw HTML, no Markdown syntax, one line."""
    text = " ".join(str(value).split())
    text = html.escape(text, quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


def table_markdown(table: Table, max_text: int = MAX_TEXT) -> str:
    lines = [f"**{md_escape(table.title)}**", ""]
    lines.append("| " + " | ".join(md_escape(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---:" if _numeric(table, i) else "---" for i in range(len(table.columns))) + "|")
    for row in table.rows:
        cells = []
        for col, value in zip(table.columns, row, strict=True):
            text = format_cell(value, col)
            if len(text) > max_text:
                text = text[: max_text - 1] + "…"
            cells.append(md_escape(text))
        lines.append("| " + " | ".join(cells) + " |")
    if not table.rows:
        lines.append("| " + " | ".join(["–"] * len(table.columns)) + " |")
    if table.caption:
        lines += ["", f"_{md_escape(table.caption)}_"]
    return "\n".join(lines) + "\n"


def _numeric(table: Table, i: int) -> bool:
    cells = [r[i] for r in table.rows if r[i] is not None]
    return bool(cells) and all(isinstance(c, int | float) and not isinstance(c, bool) for c in cells)


def notes_markdown(notes: list[str]) -> str:
    return "".join(f"- {md_escape(n)}\n" for n in notes)


def result_markdown(result: AnalysisResult, image: str | None = None) -> str:
    out = [f"### {md_escape(result.title)}", "", f"_{md_escape(result.reference)}_", ""]
    if image:
        out += [f"![{md_escape(result.title)}]({image})", ""]
    out += [table_markdown(t) for t in result.tables]
    if result.notes:
        out += ["Notes:", "", notes_markdown(result.notes)]
    return "\n".join(out)


def render_markdown(report: Report, path: Path) -> str:
    """The report as Markdown for ``path``; plots are written to ``<stem>_files/`` beside it."""
    images = path.parent / f"{path.stem}_files"
    s = report.settings
    out = [
        f"# {md_escape(report.title)}",
        "",
        f"generated {report.created_at} by polytox {report.version} · {len(report.runs)} run(s) · "
        f"toxic = score {md_escape(s['comparison'])} {s['threshold']} · scorer: {md_escape(s['scorer'])} · "
        f"attribute: {md_escape(str(s.get('attribute', 'toxicity')))}",
        "",
    ]
    if report.notes:
        out += [notes_markdown(report.notes)]
    out += ["## Leaderboard", ""] + [table_markdown(t) for t in report.leaderboard.document_tables()]
    if report.leaderboard.notes:
        out += ["Notes:", "", notes_markdown(report.leaderboard.notes)]
    out += ["## Analyses", ""]
    for sec in report.sections:
        if sec.result is None:
            out += [f"### {md_escape(sec.name)}", "", f"not available: {md_escape(sec.error or '')}", ""]
            continue
        link = None
        if sec.png:
            images.mkdir(parents=True, exist_ok=True)
            _write_png(images / f"{sec.name}.png", sec.png)
            link = f"{images.name}/{sec.name}.png"
        out.append(result_markdown(sec.result, link))
    for corpus in report.corpus:  # pretraining corpora (polytox corpus; RTP §6)
        from ..corpus.render import stats_markdown

        out += [stats_markdown(corpus.stats), ""]
    out += ["## Most and least toxic continuations", ""] + [table_markdown(t) for t in report.samples.tables]
    out += ["## Runs", ""]
    for r in report.runs:
        out.append(
            f"- `{md_escape(r.run_id)}` — model {md_escape(r.model)}, prompt set {md_escape(r.prompt_set)}, "
            f"scorers {md_escape(', '.join(r.scorer_ids))}, status {md_escape(r.status)}"
        )
    return "\n".join(out) + "\n"


def _write_png(path: Path, data: bytes) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    atomic_write(path, write)
