"""Prompts from the Hugging Face hub through ``datasets`` (streamed; needs network and, for PTP, the
licence accepted on the hub).

Known ids: ``allenai/real-toxicity-prompts`` (split ``train``) and
``ToxicityPrompts/PolygloToxicityPrompts`` (config ``ptp-<lang>`` / ``wildchat-<lang>``, split
``full`` or ``small``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import PolytoxError, require
from .readers import RawRecord

DEFAULT_SPLITS = {"allenai/real-toxicity-prompts": "train", "ToxicityPrompts/PolygloToxicityPrompts": "small"}


def read_hf_dataset(name: str, config: str | None, split: str | None) -> Iterator[RawRecord]:
    datasets = require("datasets", "datasets")
    split = split or DEFAULT_SPLITS.get(name, "train")
    if name == "ToxicityPrompts/PolygloToxicityPrompts" and not config:
        raise PolytoxError("PolygloToxicityPrompts needs --hf-config, e.g. ptp-en or wildchat-de")
    try:
        ds = datasets.load_dataset(name, config, split=split, streaming=True)
    except Exception as exc:  # network, gating, unknown id: report, do not crash with a traceback
        raise PolytoxError(f"cannot load Hugging Face dataset {name!r} ({config}, {split}): {exc}") from exc
    for i, row in enumerate(ds, start=1):
        yield RawRecord(f"hf://{name}/{config or ''}/{split}:row {i}", record=row)
