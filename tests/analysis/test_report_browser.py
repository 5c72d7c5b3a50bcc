"""The report in a real headless chromium (Debian's package), driven over the DevTools protocol.

Install it with ``make browser`` (``apt-get install chromium``); without it the test is skipped with
that instruction. It asserts that the report renders, logs no console error, shows its tables and
decoded images, and that hostile continuations (``<script>``, ``onerror=``, ``onload=``) do not execute
— checked through the JS side effect they would have (``window.__polytoxXss``), with a control page
proving the check sees an executed payload, and with the report's CSP removed so the escaping alone is
what is tested.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_cdp import Browser, find_chromium

from conftest import MODELS, XSS_PROMPTS
from polytox.analysis import ANALYSES
from polytox.report.build import Report

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: run `make browser` (apt-get install -y chromium)"
)

SIDE_EFFECT = "typeof window.__polytoxXss === 'undefined' ? null : String(window.__polytoxXss)"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    assert CHROMIUM is not None
    home = tmp_path_factory.mktemp("chromium")
    with Browser(CHROMIUM, home / "profile", home / "chromium.log") as b:
        yield b


def test_control_page_shows_the_side_effect_check_works(browser: Browser, tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        "<!DOCTYPE html><html><body>"
        + XSS_PROMPTS[0]["text"]
        + "<script>console.error('control error')</script></body></html>"
    )
    page = browser.open(control.as_uri())
    assert page.eval(SIDE_EFFECT) == "script"  # an unescaped payload does run here
    assert any("control error" in e for e in page.console_errors())  # and console errors are seen


def _check(page, report: Report) -> None:  # type: ignore[no-untyped-def]
    assert page.eval("document.readyState") == "complete"
    assert page.eval("document.title") == report.title
    assert page.eval(SIDE_EFFECT) is None  # no payload ran
    assert (
        page.eval("document.querySelectorAll('main script, main svg, main [onerror], main [onload]').length")
        == 0
    )
    # Open every collapsible (the per-model samples, the manifests) as a reader browsing it would.
    opened = page.eval("Array.from(document.querySelectorAll('details')).map(d => (d.open = true)).length")
    assert opened == len(report.runs) + len({(r[0], r[1]) for r in report.samples.table("most_toxic").rows})
    body = page.eval("document.body.innerText")
    for prompt in XSS_PROMPTS:  # the payloads are on the page, as text
        assert prompt["text"] in body
    for model in MODELS:
        assert model in body
    n_tables = page.eval("document.querySelectorAll('table').length")
    assert n_tables >= 10
    assert page.eval("document.querySelector('table[data-table=leaderboard] tbody').rows.length") == len(
        report.leaderboard.rows
    )
    images = page.eval("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) == sum(1 for s in report.sections if s.png)
    assert all(done and w > 300 and h > 200 for done, w, h in images)  # decoded PNGs, not broken images
    sections = page.eval("Array.from(document.querySelectorAll('section')).map(s => s.id)")
    assert {f"analysis-{n}" for n in ANALYSES} <= set(sections)
    assert page.eval("document.body.scrollHeight") > 2000  # laid out, not an empty page


def test_report_renders_without_errors_and_nothing_executes(
    browser: Browser, report_html: Path, full_report: Report, tmp_path: Path
) -> None:
    page = browser.open(report_html.as_uri())
    _check(page, full_report)
    assert page.console_errors() == []
    shot = page.screenshot(tmp_path / "report.png")
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000


def test_escaping_alone_stops_the_payloads(
    browser: Browser, report_html: Path, full_report: Report, tmp_path: Path
) -> None:
    html = report_html.read_text(encoding="utf-8")
    start = html.index('<meta http-equiv="Content-Security-Policy"')
    no_csp = html[:start] + html[html.index(">", start) + 1 :]
    assert "Content-Security-Policy" not in no_csp
    path = tmp_path / "no-csp.html"
    path.write_text(no_csp, encoding="utf-8")
    page = browser.open(path.as_uri())
    _check(page, full_report)
    assert page.console_errors() == []
