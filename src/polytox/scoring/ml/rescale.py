"""Re-read a stored run on another scale: the map of a named scale, found from the run's scorer id.

A run scored by ``polytox-ml`` (or ``default``, which routes to it) keeps each score's raw value
(``toxicity_raw``). The scorer id names the head (``polytox-ml@<version>-[<training data>-]<mode>-<digest>...``;
heads from version 6 name their training data, e.g. ``persp.rtplx.human.ud``), so the
scales fitted for that head (``scales.py``) can map the stored raw values onto any of them:
``polytox metrics RUN --scale NAME``, the leaderboard and the report use this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import PolytoxError
from ...store.files import slug
from .calib import CONTINUATION, TEXT_KINDS, ScaleMaps
from .head import MlHead, default_head_path
from .scales import HEAD_SCALE, load_scales

ML_ID = re.compile(
    r"^polytox-ml[@_](?P<version>[^-]+)-(?:(?P<data>[a-z.]+)-)?(?P<mode>full|ngram)-(?P<digest>[0-9a-f]{12})(?P<rest>.*)$"
)


def ml_ids(manifest: Mapping[str, Any], scorer_id: str) -> list[str]:
    """The polytox-ml ids behind a stored scorer: itself, or the routes of ``default`` in the manifest."""
    if ML_ID.match(scorer_id):
        return [scorer_id]
    described = manifest.get("scorer", {}) if isinstance(manifest.get("scorer"), dict) else {}
    if slug(str(described.get("id"))) == slug(scorer_id):
        return sorted({r for r in described.get("routes", {}).values() if ML_ID.match(str(r))})
    return []


def run_rescale(
    manifest: Mapping[str, Any], scorer_id: str, name: str
) -> tuple[str, Callable[[np.ndarray, str], np.ndarray]]:
    """(the scale's label, a per-language map of raw values) for a run's stored scorer."""
    ids = ml_ids(manifest, scorer_id)
    if len(ids) != 1:
        raise PolytoxError(
            f"--scale needs scores of polytox-ml (or default routing to it); {scorer_id!r} "
            f"{'routes to several heads' if ids else 'is not such a scorer'}"
        )
    match = ML_ID.match(ids[0])
    assert match is not None
    mode, digest = match["mode"], match["digest"]
    described = manifest.get("scorer", {}) if isinstance(manifest.get("scorer"), dict) else {}
    head_path = next(
        (
            p
            for p in (described.get("head"), str(default_head_path()))
            if p and Path(p).is_file() and MlHead.load(p).digest == digest
        ),
        None,
    )
    if head_path is None:
        raise PolytoxError(
            f"the head {digest} that scored this run is not here (the committed head is "
            f"{MlHead.load(default_head_path()).digest}); its scales cannot be read"
        )
    if name == HEAD_SCALE or name.startswith(HEAD_SCALE + ":"):
        text = name.partition(":")[2] or CONTINUATION
        if text not in TEXT_KINDS:
            raise PolytoxError(f"scale head:TEXT takes TEXT in {', '.join(TEXT_KINDS)}, got {text!r}")
        head = MlHead.load(head_path)
        if mode not in head.scale:
            raise PolytoxError(f"head {digest} has no maps for mode {mode!r}")
        maps = ScaleMaps.from_json(head.scale[mode])
        return f"{HEAD_SCALE} (English: {text} map; other languages: rater share)", lambda raw, lang: maps.apply_lang(
            raw, lang, text
        )
    scales = load_scales(head_path, digest)
    if scales is None:
        raise PolytoxError(f"no named scales were fitted for head {digest}; only --scale {HEAD_SCALE} applies")
    scale = scales.get(name)
    if mode not in scale.maps:
        raise PolytoxError(f"scale {name!r} has maps for mode {', '.join(sorted(scale.maps))} only")
    named = scale.maps[mode]
    return name, lambda raw, lang: named.apply_lang(raw, lang)
