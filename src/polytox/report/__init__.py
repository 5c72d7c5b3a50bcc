"""Reports over run directories: plots (matplotlib, optional extra ``report``), and self-contained HTML,
Markdown and JSON renderings of the leaderboard and the analyses. Reads only from run stores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from .build import Report, build_report
    from .html import render_html
    from .jsonexport import report_dict
    from .markdown import render_markdown
    from .terminal import print_result

__all__ = ["Report", "build_report", "print_result", "render_html", "render_markdown", "report_dict"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "Report": ".build",
        "build_report": ".build",
        "render_html": ".html",
        "report_dict": ".jsonexport",
        "render_markdown": ".markdown",
        "print_result": ".terminal",
    },
)
