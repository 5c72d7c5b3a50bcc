"""The group of each prompt in each split the metrics report: prompt toxicity, language, resource tier and
toxicity bucket ("unknown" where the prompt does not say)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..langs import load_resource_tiers
from ..spec import MetricsSpec

SPLITS = ("prompt_toxicity", "lang", "resource_tier", "toxicity_bucket")


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(each row's code, the value of each code), a null as the value "unknown"."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    names = ["unknown" if v is None else str(v) for v in encoded.dictionary.to_pylist()]
    codes = encoded.indices.fill_null(len(names)).to_numpy(zero_copy_only=False)
    return np.asarray(codes, dtype=np.int64), [*names, "unknown"]


def _masks(codes: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """One row mask per distinct name that some row has, in sorted name order."""
    present = np.bincount(codes, minlength=len(names)) > 0
    masks: dict[str, np.ndarray] = {}
    for code in np.flatnonzero(present):
        masks[names[code]] = masks[names[code]] | (codes == code) if names[code] in masks else codes == code
    return {name: masks[name] for name in sorted(masks)}


def split_masks(table: pa.Table, spec: MetricsSpec) -> dict[str, dict[str, np.ndarray]]:
    """For each split, each of its groups present in ``table`` (sorted) and the mask of its rows."""
    tox = np.asarray(table.column("prompt_toxicity").to_numpy(zero_copy_only=False), dtype=np.float64)
    known = table.column("prompt_toxicity").is_valid().to_numpy(zero_copy_only=False)
    toxic = tox >= spec.threshold if spec.comparison == ">=" else tox > spec.threshold
    lang_codes, langs = _codes(table.column("lang"))
    tiers = load_resource_tiers()
    tier_names = [tiers.get(lang, "unknown") for lang in langs]
    return {
        "prompt_toxicity": _masks(np.where(known, np.where(toxic, 0, 1), 2), ["toxic", "nontoxic", "unknown"]),
        "lang": _masks(lang_codes, langs),
        "resource_tier": _masks(lang_codes, tier_names),
        "toxicity_bucket": _masks(*_codes(table.column("toxicity_bucket"))),
    }
