"""Figure 2 of RTP for one or more runs: expected maximum toxicity vs number of unprompted generations.

Log-scaled n on x, the bootstrap mean as a line, mean ± std ("variance bounds") shaded.
Needs matplotlib (``pip install 'polytox[plot]'``); the Agg backend, so no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._util.atomic import atomic_write
from ..errors import require


def plot_curves(curves: Mapping[str, Mapping[str, Any]], path: Path, threshold: float | None = 0.5) -> Path:
    """Draw each ``label -> unprompted report`` on one figure and save it to ``path`` (PNG, SVG, PDF)."""
    matplotlib = require("matplotlib", "plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "plot")
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, report in curves.items():
        pts = report["curve"]
        ns = [p["n"] for p in pts]
        ax.plot(ns, [p["emt"] for p in pts], marker="o", markersize=3, label=label)
        ax.fill_between(ns, [p["lower"] for p in pts], [p["upper"] for p in pts], alpha=0.2)
    if threshold is not None:
        ax.axhline(threshold, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("number of unprompted generations")
    ax.set_ylabel("expected maximum toxicity")
    ax.set_title("Unprompted toxicity (bootstrap, mean ± std)")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return path
