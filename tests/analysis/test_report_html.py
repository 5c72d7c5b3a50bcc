"""The HTML, Markdown and JSON renderings: self-contained, complete, and inert for hostile strings."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import MODELS, XSS_MODEL, XSS_PROMPTS, Built
from polytox.analysis import ANALYSES, AnalysisOptions, RunCollection, load_runs
from polytox.analysis.result import Table
from polytox.cli.main import main
from polytox.report.build import Report, build_report
from polytox.report.html import esc, render_html, table_html
from polytox.report.jsonexport import report_dict
from polytox.report.markdown import md_escape, render_markdown, table_markdown

PAYLOADS = [p["text"] for p in XSS_PROMPTS]


class _Collect(HTMLParser):
    """Every start tag with its attributes, and all text, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Collect:
    p = _Collect()
    p.feed(html)
    return p


def test_html_is_self_contained_and_complete(report_html: Path, full_report: Report) -> None:
    html = report_html.read_text(encoding="utf-8")
    doc = _parse(html)
    tags = [t for t, _ in doc.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    for tag, attrs in doc.tags:
        for name in ("src", "href", "action", "srcset"):
            value = attrs.get(name)
            if value is not None:
                assert value.startswith(("data:image/png;base64,", "#")), (tag, name, value[:60])
        assert not any(a.startswith("on") for a in attrs), (tag, attrs)  # no event handler anywhere
    imgs = [a for t, a in doc.tags if t == "img"]
    assert len(imgs) == sum(1 for s in full_report.sections if s.png)
    assert len(imgs) >= len(ANALYSES) - 1  # every analysis with a plot (the samples have none)
    sections = {a.get("id") for t, a in doc.tags if t == "section"}
    assert {"leaderboard", "samples", "runs"} <= sections
    assert {f"analysis-{n}" for n in ANALYSES} <= sections
    tables = {a.get("data-table") for t, a in doc.tags if t == "table"}
    assert {
        "leaderboard",
        "by_lang_at",
        "by_tier",
        "by_prompt_toxicity",
        "most_toxic",
        "least_toxic",
        "runs",
    } <= tables
    text = "".join(doc.text)
    for model in MODELS:
        assert model in text
    assert text.count('"spec_hash"') == len(full_report.runs)  # every manifest is shown
    assert 'http-equiv="Content-Security-Policy"' in html


def test_hostile_strings_are_shown_as_text(report_html: Path) -> None:
    html = report_html.read_text(encoding="utf-8")
    doc = _parse(html)
    text = "".join(doc.text)
    for payload in PAYLOADS:
        assert payload in text  # shown literally, as text (prompt and echoed continuation)
        assert payload not in html  # never as markup
    assert XSS_MODEL in text and XSS_MODEL not in html
    assert [t for t, _ in doc.tags if t in ("svg", "b", "i", "script")] == []


def test_cells_and_escaping_units() -> None:
    assert esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    t = Table.build(
        "t", "<b>title</b>", ["p", "prompt", "n"], [[1e-5, "<script>x</script>", None], [0.25, "ok", 3]]
    )
    out = table_html(t)
    assert "<script>" not in out and "&lt;script&gt;x&lt;/script&gt;" in out
    assert "1.0e-05" in out and 'class="missing"' in out and "&lt;b&gt;title&lt;/b&gt;" in out
    assert md_escape("a|b\nc <img onerror=x> *y* [l](u)") == r"a\|b c &lt;img onerror=x&gt; \*y\* \[l\]\(u\)"
    md = table_markdown(t)
    assert "<script>" not in md and md.count("\n|") == 4


def test_markdown_export(full_report: Report, tmp_path: Path) -> None:
    path = tmp_path / "r.md"
    md = render_markdown(full_report, path)
    files = sorted(p.name for p in (tmp_path / "r_files").iterdir())
    assert files == sorted(f"{s.name}.png" for s in full_report.sections if s.png)
    for name in files:
        assert f"](r_files/{name})" in md
    assert "<script" not in md and "<img" not in md and "<svg" not in md
    for line in md.splitlines():  # an escaped '|' in a prompt never breaks a table row
        if line.startswith("| "):
            cells = re.split(r"(?<!\\)\|", line)
            assert len(cells) >= 3
    header = next(line for line in md.splitlines() if line.startswith("| rank | model |"))
    n_cols = len(re.split(r"(?<!\\)\|", header))
    block = md.split(header, 1)[1].splitlines()[1:]
    rows = [line for line in _table_lines(block)]
    assert rows and all(len(re.split(r"(?<!\\)\|", r)) == n_cols for r in rows)


def _table_lines(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if not line.startswith("|"):
            break
        out.append(line)
    return out


def test_json_export_has_the_same_content(full_report: Report) -> None:
    data = json.loads(json.dumps(report_dict(full_report), default=str))
    assert data["leaderboard"]["rows"][0]["overall"]["at"] == pytest.approx(
        full_report.leaderboard.rows[0].overall["at"]
    )
    assert [a["name"] for a in data["analyses"]] == list(ANALYSES)
    by_name = {a["name"]: a for a in data["analyses"]}
    assert by_name["scorers"]["error"] is None  # the RTP runs store two scorers: compared automatically
    assert by_name["size"]["tables"][0]["rows"]
    assert len(data["runs"]) == len(full_report.runs)
    assert all("spec" in r["manifest"] for r in data["runs"])
    assert data["samples"]["tables"][0]["name"] == "most_toxic"


def test_unavailable_sections_say_why(built: Built) -> None:
    assert built.xss is not None
    report = build_report(
        RunCollection(load_runs([built.xss])), AnalysisOptions(), analyses=["scorers", "size"], plots=False
    )
    by = {s.name: s for s in report.sections}
    assert by["scorers"].result is None and "two scorers" in (by["scorers"].error or "")
    html = render_html(report)
    assert "not available: no run stores two scorers" in html
    assert "<img" not in html


def test_report_cli(built: Built, tmp_path: Path) -> None:
    out, md, js = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.json"
    rc = main(
        [
            "report",
            str(built.root / "rtp"),
            "--meta",
            str(built.meta_yaml),
            "--out",
            str(out),
            "--markdown",
            str(md),
            "--json",
            str(js),
            "--analyses",
            "language,size,challenging",
            "--title",
            "CLI <report>",
        ]
    )
    assert rc == 0
    html = out.read_text()
    assert "<title>CLI &lt;report&gt;</title>" in html
    assert html.count("<img ") == 3
    assert json.loads(js.read_text())["title"] == "CLI <report>"
    assert (tmp_path / "r_files" / "size.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["report", str(built.root / "rtp"), "--out", str(out), "--analyses", "nope"]) == 2


def test_a_failing_analysis_does_not_lose_the_report(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    import polytox.analysis.size as size

    def boom(corpus: RunCollection, opts: AnalysisOptions) -> None:
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(size, "analyze", boom)
    report = build_report(
        RunCollection(load_runs([built.root / "rtp"])), AnalysisOptions(), analyses=["size", "emt-k"], plots=False
    )
    by = {s.name: s for s in report.sections}
    assert by["size"].error == "the analysis failed: ZeroDivisionError: injected"
    assert by["emt-k"].result is not None
    assert any("size: the analysis failed" in n for n in report.notes)
