"""The report as one self-contained HTML file: inline CSS, plots as ``data:`` PNGs, no script, no
external reference, so it opens offline and from an e-mail attachment.

Every string that did not come from this module — model names, prompts, continuations, manifests,
notes — passes through ``esc`` (``html.escape`` with quotes), so a continuation such as
``<script>...</script>`` or ``<img onerror=...>`` is shown as text. A Content-Security-Policy that
allows no script at all is a second wall behind the escaping.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterable
from typing import Any

from ..analysis.result import AnalysisResult, Table
from ..analysis.runs import format_params
from .build import Report
from .cells import format_cell

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
TEXT_COLUMNS = frozenset({"prompt", "continuation"})

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d232a;
     background:#fafbfc;line-height:1.4}
header{background:#1f3a5f;color:#fff;padding:1rem 2rem}header h1{margin:0 0 .3rem 0;font-size:1.5rem}
header p{margin:0;opacity:.85;font-size:.9rem}
nav{padding:.5rem 2rem;background:#e8edf3;font-size:.9rem}nav ol{margin:0;padding-left:1.2rem;columns:2}
main{padding:0 2rem 3rem 2rem;max-width:1500px}
section{margin-top:2rem}h2{border-bottom:2px solid #1f3a5f;padding-bottom:.2rem}h3{margin-bottom:.3rem}
.ref{color:#555;font-style:italic;margin-top:-.5rem}
.tablewrap{overflow-x:auto;margin:.5rem 0 1rem 0}
table{border-collapse:collapse;font-size:.82rem;background:#fff}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;vertical-align:top;white-space:nowrap}
th{background:#f0f3f6;text-align:left;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.missing{color:#999;text-align:center}
td.text{min-width:16rem;max-width:32rem;white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,Menlo,monospace;
        font-size:.78rem}
caption{caption-side:bottom;text-align:left;color:#555;font-size:.78rem;padding-top:.2rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #d0d7de;background:#fff}
figcaption{color:#555;font-size:.8rem}
ul.notes{font-size:.85rem;color:#6a4a00;background:#fff8e1;border-left:4px solid #f0b400;padding:.5rem 1.5rem}
p.error{background:#fdecea;border-left:4px solid #d93025;padding:.5rem 1rem}
details{margin:.4rem 0;background:#fff;border:1px solid #d0d7de;padding:.3rem .6rem}
summary{cursor:pointer;font-weight:600}
pre{white-space:pre-wrap;word-break:break-word;font-size:.78rem;background:#f6f8fa;padding:.5rem;
    max-height:40rem;overflow:auto}
"""


def esc(value: object) -> str:
    """Escape any text for HTML element content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def anchor(value: str) -> str:
    """A safe fragment id from any label."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", value).strip("-") or "x"


def table_html(table: Table) -> str:
    """A ``Table`` as HTML; every cell escaped, numbers right-aligned, missing values marked."""
    head = "".join(f'<th scope="col">{esc(c)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        cells = []
        for col, value in zip(table.columns, row, strict=True):
            if value is None:
                cells.append('<td class="missing" title="missing">–</td>')
            elif col in TEXT_COLUMNS:
                cells.append(f'<td class="text">{esc(value)}</td>')
            elif isinstance(value, int | float) and not isinstance(value, bool):
                cells.append(f'<td class="num">{esc(format_cell(value, col))}</td>')
            else:
                cells.append(f"<td>{esc(format_cell(value, col))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<caption>{esc(table.caption)}</caption>" if table.caption else ""
    if not table.rows:
        body.append(f'<tr><td class="missing" colspan="{len(table.columns)}">no rows</td></tr>')
    return (
        f'<h3>{esc(table.title)}</h3><div class="tablewrap"><table data-table="{esc(table.name)}">{caption}'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def notes_html(notes: Iterable[str]) -> str:
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<ul class="notes">{items}</ul>' if items else ""


def figure_html(png: bytes, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def _result_html(result: AnalysisResult) -> str:
    return "".join(table_html(t) for t in result.tables) + notes_html(result.notes)


def _samples_html(samples: AnalysisResult) -> str:
    """Per model, a collapsible pair of tables: its most and least toxic continuations."""
    out = [notes_html(samples.notes)]
    most, least = samples.table("most_toxic"), samples.table("least_toxic")
    keys = list(dict.fromkeys((r[0], r[1]) for r in most.rows + least.rows))
    for model, prompt_set in keys:
        parts = []
        for t in (most, least):
            rows = tuple(r for r in t.rows if (r[0], r[1]) == (model, prompt_set))
            parts.append(table_html(Table(name=t.name, title=t.title, columns=t.columns, rows=rows)))
        out.append(f"<details><summary>{esc(model)} · {esc(prompt_set)}</summary>{''.join(parts)}</details>")
    return "".join(out)


def _runs_html(report: Report) -> str:
    rows = []
    for r in report.runs:
        gen = r.manifest.get("spec", {}).get("generation", {})
        rows.append(
            [
                r.run_id,
                r.model,
                r.prompt_set,
                ", ".join(r.scorer_ids),
                r.meta.family,
                format_params(r.meta.params),
                r.meta.category,
                r.meta.alignment,
                gen.get("samples"),
                r.status,
                str(r.path),
            ]
        )
    summary = Table.build(
        "runs",
        "Runs",
        [
            "run",
            "model",
            "prompt set",
            "scorers",
            "family",
            "params",
            "category",
            "alignment",
            "K",
            "status",
            "path",
        ],
        rows,
    )
    details = []
    for r in report.runs:
        manifest = json.dumps(r.manifest, indent=2, ensure_ascii=False, default=str)
        details.append(
            f'<details id="run-{anchor(r.run_id)}"><summary>{esc(r.run_id)} — {esc(r.model)}</summary>'
            f"<pre>{esc(manifest)}</pre></details>"
        )
    return table_html(summary) + "<h3>Manifests</h3>" + "".join(details)


def _corpus_html(i: int, corpus: Any) -> str:
    from .corpus_section import section_rows, summary_line

    parts = [
        f'<section id="corpus-{i}"><h2>Corpus toxicity: {esc(corpus.stats["source"])}</h2>'
        f'<p class="ref">RTP §6.1 — {esc(summary_line(corpus.stats))}</p>'
    ]
    if corpus.png:
        parts.append(figure_html(corpus.png, "toxicity histogram", "document toxicity, log-scale counts (RTP Fig. 3)"))
    for title, header, rows in section_rows(corpus.stats):
        head = "".join(f"<th>{esc(h)}</th>" for h in header)
        cells = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
        parts.append(f"<h3>{esc(title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
    return "".join(parts) + "</section>"


def render_html(report: Report) -> str:
    """The whole report as one HTML document."""
    board = report.leaderboard
    s = report.settings
    toc = ['<li><a href="#leaderboard">Leaderboard</a></li>']
    body = [
        '<section id="leaderboard"><h2>Leaderboard</h2>'
        '<p class="ref">one row per model and prompt set; AT / EMT / EP ± std over prompts</p>'
        + "".join(table_html(t) for t in board.document_tables())
        + notes_html(board.notes)
        + "</section>"
    ]
    for sec in report.sections:
        title = sec.result.title if sec.result else sec.name
        toc.append(f'<li><a href="#{sec.anchor}">{esc(title)}</a></li>')
        parts = [f'<section id="{sec.anchor}" data-analysis="{esc(sec.name)}"><h2>{esc(title)}</h2>']
        if sec.result is not None:
            parts.append(f'<p class="ref">{esc(sec.result.reference)} — {esc(sec.description)}</p>')
            if sec.png:
                parts.append(figure_html(sec.png, f"plot: {title}", sec.result.reference))
            parts.append(_result_html(sec.result))
        if sec.error:
            parts.append(f'<p class="error">not available: {esc(sec.error)}</p>')
        parts.append("</section>")
        body.append("".join(parts))
    for i, corpus in enumerate(report.corpus):  # pretraining corpora (polytox corpus; RTP §6)
        toc.append(f'<li><a href="#corpus-{i}">Corpus: {esc(corpus.stats["source"])}</a></li>')
        body.append(_corpus_html(i, corpus))
    toc += [
        '<li><a href="#samples">Most and least toxic continuations</a></li>',
        '<li><a href="#runs">Runs and manifests</a></li>',
    ]
    body.append(
        '<section id="samples"><h2>Most and least toxic continuations</h2>'
        + _samples_html(report.samples)
        + "</section>"
    )
    body.append('<section id="runs"><h2>Runs and manifests</h2>' + _runs_html(report) + "</section>")
    meta = (
        f"generated {esc(report.created_at)} by polytox {esc(report.version)} · {len(report.runs)} run(s) · "
        f"toxic = score {esc(s['comparison'])} {esc(s['threshold'])} · scorer: {esc(s['scorer'])}"
        f" · attribute: {esc(s.get('attribute', 'toxicity'))}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(report.title)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>{esc(report.title)}</h1><p>{meta}</p></header>"
        f"<nav><ol>{''.join(toc)}</ol></nav><main>{notes_html(report.notes)}{''.join(body)}</main>"
        "</body></html>\n"
    )
