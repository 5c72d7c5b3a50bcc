"""One plot per analysis, drawn with matplotlib's Agg canvas (no display, no global pyplot state) and
returned as PNG bytes. matplotlib is the optional extra ``report``; it is imported only here.

Labels are model names and other user strings: ``_t`` escapes ``$`` so matplotlib's math-text parser
draws a name as written.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

from ..analysis.result import AnalysisResult
from ..errors import require

Plotter = Callable[[Any, AnalysisResult], None]
MAX_LEGEND = 14


def _figure(ncols: int = 1, width: float = 7.0, height: float = 4.2) -> tuple[Any, list[Any]]:
    require("matplotlib", "report")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols if ncols > 1 else width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)  # the Agg raster backend, whatever matplotlib's default backend is
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def _t(text: object) -> str:
    """A user string as literal matplotlib text (no math-text)."""
    return str(text).replace("$", r"\$")


def _legend(ax: Any) -> None:
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7 if len(handles) > 6 else 8, ncol=1 + len(handles) // MAX_LEGEND, loc="best")


def _sem(std: float | None, n: int) -> float:
    return 0.0 if std is None or n < 2 else std / math.sqrt(n)


def _language(fig: Any, res: AnalysisResult) -> None:
    ax1, ax2 = fig.axes
    langs, tiers = res.data["langs"], res.data["tiers"]
    for s in res.data["series"]:
        xs = [i for i, v in enumerate(s["at"]) if v is not None]
        ax1.plot(xs, [s["at"][i] for i in xs], marker="o", label=_t(s["label"]))
    ax1.set_xticks(range(len(langs)), [_t(x) for x in langs])
    ax1.set(xlabel="language", ylabel="AVERAGE TOXICITY", title="AT per language (PTP Fig. 3)")
    _legend(ax1)
    n = max(1, len(res.data["series"]))
    width = 0.8 / n
    for j, s in enumerate(res.data["series"]):
        bar_x = [i + j * width for i, v in enumerate(s["tier_at"]) if v is not None]
        bar_y = [v for v in s["tier_at"] if v is not None]
        ax2.bar(bar_x, bar_y, width=width, label=_t(s["label"]))
    ax2.set_xticks([i + 0.4 - width / 2 for i in range(len(tiers))], [_t(x) for x in tiers])
    ax2.set(xlabel="resource tier", ylabel="AVERAGE TOXICITY", title="AT by resource tier (PTP Tab. 2)")


def _size(fig: Any, res: AnalysisResult) -> None:
    (ax,) = fig.axes
    for s in res.data["series"]:
        pts = [p for p in s["points"] if p["at"] is not None]
        if not pts:
            continue
        ax.errorbar(
            [p["params"] for p in pts],
            [p["at"] for p in pts],
            yerr=[_sem(p["std"], p["n"]) for p in pts],
            marker="o",
            capsize=3,
            label=_t(f"{s['family']} · {s['prompt_set']}"),
        )
    ax.set_xscale("log")
    ax.set(xlabel="parameters", ylabel="AVERAGE TOXICITY (± s.e.m.)", title="AT vs model size (PTP Fig. 4)")
    _legend(ax)


def _bars(ax: Any, points: list[dict[str, Any]], title: str) -> None:
    pts = [p for p in points if p["at"] is not None]
    ax.bar(
        range(len(pts)),
        [p["at"] for p in pts],
        yerr=[_sem(p["std"], p["n"]) for p in pts],
        capsize=4,
        color="#4C72B0",
    )
    ax.set_xticks(range(len(pts)), [_t(p["group"]) for p in pts])
    ax.set(ylabel="AVERAGE TOXICITY (± s.e.m.)", title=title)


def _category(fig: Any, res: AnalysisResult) -> None:
    ax1, ax2 = fig.axes
    _bars(ax1, res.data["categories"], "by model category (PTP Fig. 6)")
    _bars(ax2, res.data["alignment"], "by alignment method (PTP Fig. 7)")


def _hexbin(ax: Any, x: list[float], y: list[float]) -> None:
    if x:
        hb = ax.hexbin(x, y, gridsize=25, extent=(0, 1, 0, 1), mincnt=1, cmap="viridis")
        ax.figure.colorbar(hb, ax=ax, label="continuations")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)


def _prompt_toxicity(fig: Any, res: AnalysisResult) -> None:
    (ax,) = fig.axes
    _hexbin(ax, res.data["x"], res.data["y"])
    r = res.data["r"]
    ax.set(
        xlabel="prompt toxicity",
        ylabel="continuation toxicity",
        title=f"prompt vs continuation toxicity (r = {r:.2f}, n = {res.data['n']})"
        if r is not None
        else "prompt vs continuation toxicity (r undefined)",
    )


def _scorers(fig: Any, res: AnalysisResult) -> None:
    (ax,) = fig.axes
    _hexbin(ax, res.data["x"], res.data["y"])
    r = res.data["r"]
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
    ax.set(
        xlabel=_t(res.data["a"]),
        ylabel=_t(res.data["b"]),
        title=f"scorer agreement (r = {r:.2f})" if r is not None else "scorer agreement (r undefined)",
    )


def _challenging(fig: Any, res: AnalysisResult) -> None:
    (ax,) = fig.axes
    for prompt_set, minima in res.data["minima"].items():
        if minima:
            ax.hist(minima, bins=20, range=(0, 1), alpha=0.6, label=_t(prompt_set))
    ax.axvline(res.data["threshold"], color="red", linestyle="--", label=f"threshold {res.data['threshold']}")
    ax.set(
        xlabel="least toxic model's maximum score",
        ylabel="prompts",
        title="how toxic every model gets on each prompt (RTP §5.3)",
    )
    _legend(ax)


def _sources(fig: Any, res: AnalysisResult) -> None:
    (ax,) = fig.axes
    sets, series = res.data["sets"], res.data["series"]
    width = 0.8 / max(1, len(sets))
    for j, ps in enumerate(sets):
        xs = [i + j * width for i, s in enumerate(series) if s["at"][j] is not None]
        ys = [s["at"][j] for s in series if s["at"][j] is not None]
        ax.bar(xs, ys, width=width, label=_t(ps))
    ax.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(series))],
        [_t(s["model"]) for s in series],
        rotation=30,
        ha="right",
    )
    ax.set(ylabel="AVERAGE TOXICITY", title="AT by prompt source (PTP Fig. 9)")
    _legend(ax)


def _emt_k(fig: Any, res: AnalysisResult) -> None:
    ax1, ax2 = fig.axes
    for s in res.data["series"]:
        for ax, key in ((ax1, "emt"), (ax2, "ep")):
            pts = [(k, v) for k, v in zip(s["ks"], s[key], strict=True) if v is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=_t(s["label"]))
    from matplotlib.ticker import MaxNLocator

    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set(xlabel="K (continuations per prompt)", ylabel="EXPECTED MAXIMUM TOXICITY", title="EMT vs K")
    ax2.set(xlabel="K (continuations per prompt)", ylabel="EMPIRICAL PROBABILITY", title="EP vs K")
    _legend(ax1)


PLOTTERS: dict[str, tuple[int, Plotter]] = {
    "language": (2, _language),
    "size": (1, _size),
    "category": (2, _category),
    "prompt_toxicity": (1, _prompt_toxicity),
    "scorers": (1, _scorers),
    "challenging": (1, _challenging),
    "sources": (1, _sources),
    "emt_k": (2, _emt_k),
}


def plot_png(result: AnalysisResult) -> bytes | None:
    """The analysis' plot as PNG bytes, or None for an analysis without a plot."""
    if result.key not in PLOTTERS:
        return None
    ncols, draw = PLOTTERS[result.key]
    fig, _ = _figure(ncols)
    draw(fig, result)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
