"""Named scales of ``polytox-ml``: read-time maps from the head's raw output onto one quantity.

Perspective TOXICITY moved between its versions: on 511 RTP prompts scored by RTP's 2020 release and by
DeStein's later re-scoring, the later scores are 0.10 lower on average. A published EMT is on the scale of
the Perspective its authors called, so a comparison needs that scale, named. A *scale* here is a set of
monotone maps of the head's raw output (the combiner's probability, kept with every score, ``raw.py``):

- ``perspective-2020``: RealToxicityPrompts' scores (quark, fgdilp, shared ``rtp/``; all web text);
- ``perspective-2022``: IA024's scores (GPT-2 / GPT-Neo continuations);
- ``raters``: the share of human raters calling a text toxic (RTP-LX: of the 3 raters, the share rating >= 3);
- ``head``: the head's own maps, what every score carried before scales were named: English on the map of
  its ``text`` kind (``continuation``: mostly 2022, ``web``: 2020), other languages on the rater share.

Under a Perspective scale, non-English texts read the Perspective score of their English source
(``scale_fit.py``: RTP-LX translations tied by ``Index`` to a Perspective-scored English prompt), so every
language reads the same quantity. The maps and their held-out measurements live in
``polytox-ml-scales.json`` beside the head, fitted for that head's digest: a head with another digest has
no named scales (only ``head``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import PolytoxError
from .calib import CONTINUATION, ScaleMaps

SCALES_FILE = "polytox-ml-scales.json"
SCALES_FORMAT = "polytox-ml-scales/1"
HEAD_SCALE = "head"
PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS = "perspective-2020", "perspective-2022", "raters"
SCALE_NAMES = (PERSPECTIVE_2020, PERSPECTIVE_2022, RATERS)
AUTO_SCALE = "auto"
# The default scale of each text kind, chosen on the held-out split (docs/scorer-scales.md, "The default"): model
# continuations read closest on the 2022 scale (pooled EMT of a real run -0.035 against +0.048 on the 2020
# one), web text on the 2020 one (MAE 0.098 against 0.114). Their English maps are the head's own maps of
# that kind, so English values are those the head gave before scales were named.
DEFAULT_SCALES = {"continuation": PERSPECTIVE_2022, "web": PERSPECTIVE_2020}


def default_scales_path() -> Path:
    from .head import default_head_path

    return Path(default_head_path()).with_name(SCALES_FILE)


@dataclass(frozen=True)
class Scale:
    """One named scale: its maps per head mode and what the file says about it (fitting data, errors)."""

    name: str
    maps: Mapping[str, ScaleMaps]  # mode -> maps (English: one map, ``text`` ignored; per language; fallback)
    info: Mapping[str, Any] = field(default_factory=dict)

    def apply(self, raw: np.ndarray, langs: Sequence[str], mode: str) -> np.ndarray:
        if mode not in self.maps:
            raise PolytoxError(
                f"scale {self.name!r} has no maps for mode {mode!r} (it has: {', '.join(sorted(self.maps))})"
            )
        return self.maps[mode].apply(raw, langs, CONTINUATION)


@dataclass(frozen=True)
class ScaleSet:
    """Every named scale fitted for one head (``head`` digest), and the default the measurements chose."""

    head: str
    default: str
    scales: Mapping[str, Scale]
    info: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Scale:
        if name not in self.scales:
            raise PolytoxError(f"unknown scale {name!r}; known: {', '.join([HEAD_SCALE, *self.scales])}")
        return self.scales[name]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SCALES_FORMAT,
            "head": self.head,
            "default": self.default,
            **dict(self.info),
            "scales": {
                n: {**dict(s.info), "maps": {m: v.to_json() for m, v in s.maps.items()}} for n, s in self.scales.items()
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "scales file") -> ScaleSet:
        if data.get("format") != SCALES_FORMAT:
            raise PolytoxError(f"{where}: format {data.get('format')!r} is not {SCALES_FORMAT!r}")
        scales = {}
        for name, block in data["scales"].items():
            info = {k: v for k, v in block.items() if k != "maps"}
            scales[name] = Scale(name, {m: ScaleMaps.from_json(v) for m, v in block["maps"].items()}, info)
        info = {k: v for k, v in data.items() if k not in ("format", "head", "default", "scales")}
        return cls(head=str(data["head"]), default=str(data["default"]), scales=scales, info=info)


@cache
def _load(path: str) -> ScaleSet | None:
    p = Path(path)
    if not p.is_file():
        return None
    try:
        return ScaleSet.from_json(json.loads(p.read_text(encoding="utf-8")), str(p))
    except (ValueError, KeyError, TypeError) as exc:
        raise PolytoxError(f"{p}: not a polytox-ml scales file ({exc})") from None


def load_scales(head_path: Path | str, digest: str) -> ScaleSet | None:
    """The scales fitted for the head at ``head_path`` (``polytox-ml-scales.json`` beside it), or None when
    there is no such file or it was fitted for another head."""
    found = _load(str(Path(head_path).with_name(SCALES_FILE)))
    return found if found is not None and found.head == digest else None


def write_scales(scales: ScaleSet, path: Path | str) -> None:
    from ..._util.atomic import atomic_write_text

    text = json.dumps(scales.to_json(), indent=1, sort_keys=False)
    # a map's breakpoints on one line each (readable diffs, a tenth of the lines)
    text = re.sub(
        r"\[\s+([-+0-9.eE,\s]+?)\s+\]", lambda m: "[" + ", ".join(v.strip() for v in m[1].split(",")) + "]", text
    )
    atomic_write_text(Path(path), text + "\n")
    Path(path).chmod(0o644)  # a package data file: world-readable, as the head beside it
    _load.cache_clear()
