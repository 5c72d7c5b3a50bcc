"""The named scales as ``polytox scorers`` prints them: what each is fitted on, its size, its held-out error.

Read from ``polytox-ml-scales.json`` beside the committed head (``scale_fit.py`` writes it).
"""

from __future__ import annotations

import json
from typing import Any

from .head import MlHead, default_head_path
from .scales import HEAD_SCALE, default_scales_path, load_scales


def _f(value: Any, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _n_rows(scale: Any) -> int:
    maps = next(iter(scale.maps.values()))
    return int(maps.english.n + maps.fallback.n)


def scales_overview() -> str:
    """One row per scale: era, what its English and other-language maps are fitted on, size, held-out error."""
    head = MlHead.load(default_head_path())
    scales = load_scales(default_head_path(), head.digest)
    if scales is None:
        return (f"scales: only '{HEAD_SCALE}' (no {default_scales_path().name} fitted for head {head.digest})")
    lines = [f"scales of polytox-ml (--scorer-opt scale=NAME; default: {HEAD_SCALE}, the head's own maps; "
             f"measured choice for Perspective comparisons: {scales.default}; held-out split):", "",
             "| scale | era | English fitted on | other languages | map points | held-out MAE / AUC / share diff "
             "on its era | pooled EMT / EP / AT diff, 2022 real run |",
             "| --- | --- | --- | --- | ---: | --- | --- |"]
    for name, scale in scales.scales.items():
        info, held = scale.info, scale.info.get("heldout", {})
        own = {"2020": "perspective-2020", "2022": "perspective-2022"}.get(str(info.get("era")))
        err = held.get(own, {}) if own else {}
        run = held.get("perspective-2022", {}).get("run", {})
        lines.append(
            f"| {name} | {info.get('era') or '-'} | {info.get('english', '')} | {info.get('other_languages', '')} "
            f"| {_n_rows(scale)} | "
            + (f"{_f(err.get('mae'))} / {_f(err.get('auc'))} / {_f(100 * err['share_diff'], 1, True)} pt"
               if err.get("mae") is not None else "-")
            + " | " + (" / ".join(_f(run.get(f"{k}_diff"), 3, True) for k in ("emt", "ep", "at")) if run else "-")
            + " |")
    return "\n".join(lines)


def scales_detail(path: str | None = None) -> str:
    """Every scale's held-out error on every era's data, and the per-language error under perspective-2020."""
    data = json.loads((default_scales_path() if path is None else __import__("pathlib").Path(path))
                      .read_text(encoding="utf-8"))
    lines = ["| scale | era's data | n | AUC | MAE | share >= 0.5 diff | EMT diff | EP diff | AT diff |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, block in data["scales"].items():
        for era, m in block.get("heldout", {}).items():
            run = m.get("run", {})
            lines.append(f"| {name} | {era} | {m.get('n')} | {_f(m.get('auc'))} | {_f(m.get('mae'))} | "
                         f"{_f(None if m.get('share_diff') is None else 100 * m['share_diff'], 1, True)} pt | "
                         + " | ".join(_f(run.get(f"{k}_diff"), 3, True) for k in ("emt", "ep", "at")) + " |")
    return "\n".join(lines)
