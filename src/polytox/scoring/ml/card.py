"""The scorer card: each offline scorer's measured agreement, read from the committed measurement file.

``polytox train-scorer`` writes the file (``evaluate.measurements``) next to the head; ``polytox scorers``
prints it. Nothing here computes a number: the card only shows what the file holds, so what users read is
what was measured on the held-out split.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any

from ...errors import PolytoxError

DEFAULT_CARD = "polytox-ml-card.json"

COLUMNS = (
    ("auc_prompts", "AUC web prompts"),
    ("auc_web_continuations", "AUC web cont"),
    ("auc_model_continuations", "AUC model cont"),
    ("mae_web", "MAE web"),
    ("mae_model_continuations", "MAE model cont"),
    ("share_model_continuations", ">=0.5 model cont"),
    ("ece_web", "ECE web"),
    ("ece_model_continuations", "ECE model cont"),
    ("mean_auc_humans", "AUC humans mean"),
    ("min_auc_humans", "min"),
)


def default_card_path() -> Path:
    return Path(str(files("polytox").joinpath("data", DEFAULT_CARD)))


def load_card(path: Path | str | None = None) -> dict[str, Any]:
    path = Path(path) if path else default_card_path()
    if not path.exists():
        raise PolytoxError(f"scorer measurements {path} not found; 'polytox train-scorer' writes them")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PolytoxError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict) or "card" not in data:
        raise PolytoxError(f"{path}: not a polytox scorer measurement file (no 'card')")
    return data


def _fmt(value: Any, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.1f}%" if percent else f"{value:.3f}"


def diff_with_ci(diff: float, ci: Any) -> str:
    """A signed difference with its CI, ``+0.008 [-0.012, +0.031]``; measurement files made before the CIs
    were added have none, and then only the difference is shown."""
    span = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci and None not in ci else ""
    return f"{diff:+.3f}{span}"


def card_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """Header + one row per scorer, as strings."""
    rows = [["scorer", *(label for _, label in COLUMNS)]]
    for name, card in data["card"].items():
        row = [name]
        for key, _ in COLUMNS:
            value = card.get(key)
            if key == "share_model_continuations":
                ref = card.get("perspective_share_model_continuations")
                row.append(f"{_fmt(value, True)} (P {_fmt(ref, True)})" if value is not None else "-")
            else:
                row.append(_fmt(value))
        rows.append(row)
    return rows


def markdown_card(data: Mapping[str, Any]) -> str:
    rows = card_rows(data)
    lines = ["| " + " | ".join(rows[0]) + " |", "| --- |" + " ---: |" * (len(rows[0]) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def text_card(data: Mapping[str, Any]) -> str:
    rows = card_rows(data)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
           for r in rows]
    any_card: Mapping[str, Any] = next(iter(data["card"].values()), {})
    out.append("")
    out.append(f"Held-out texts: web = RTP prompts and continuations (Perspective 2020), n={any_card.get('n_web')};")
    out.append("model cont = GPT-2/GPT-Neo continuations (Perspective 2022), "
               f"n={any_card.get('n_model_continuations')}; >=0.5 = share scored >= 0.5 (P: Perspective's).")
    out.append("AUC humans = RTP-LX per language (mean, min), grouped out-of-fold. "
               f"Head {data.get('head_digest')}; details: docs/trainscorer.md.")
    return "\n".join(out)
