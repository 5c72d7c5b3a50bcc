"""The reliability diagram of the scorer card: predicted vs observed Perspective TOXICITY, by bin.

Points come from the measurement file (``reliability`` block: 10 equal-width bins of the prediction on the
held-out split, web text and model continuations drawn separately); a calibrated scorer lies on the
diagonal. matplotlib is imported lazily (the ``report`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import require


def plot_reliability(
    data: Mapping[str, Any], out: Path | str, scorers: Sequence[str] = ("default", "polytox-ml (ngram)")
) -> Path:
    mpl = require("matplotlib", "report")
    mpl.use("Agg")
    plt = require("matplotlib.pyplot", "report")
    diagrams = data["reliability"]
    names = [s for s in scorers if s in diagrams]
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        ax.plot([0, 1], [0, 1], color="#999999", lw=1, ls="--", label="perfect calibration")
        for slice_name, color in (("web (all)", "#1f77b4"), ("model continuations", "#d62728")):
            points = diagrams[name].get(slice_name, [])
            if not points:
                continue
            xs = [p["pred"] for p in points]
            ys = [p["observed"] for p in points]
            sizes = [max(12.0, min(300.0, p["n"] / 3)) for p in points]
            ece = data["card"][name]["ece_web" if slice_name == "web (all)" else "ece_model_continuations"]
            label = f"{slice_name} (ECE {ece:.3f})" if ece is not None else slice_name
            ax.plot(xs, ys, color=color, lw=1.2)
            ax.scatter(xs, ys, s=sizes, color=color, alpha=0.7, label=label)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel(f"{name}: mean predicted toxicity (bin)")
        ax.set_ylabel("mean Perspective TOXICITY (same texts)")
        ax.set_title(f"{name} on held-out English texts", fontsize=10)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
