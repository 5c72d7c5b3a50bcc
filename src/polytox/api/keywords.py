"""``EvaluateSettings``: the keywords of ``polytox.evaluate`` as a type checker and an editor see them.

One key per row of the settings table that is a keyword of ``evaluate`` (``api.evaluation.keywords``), typed
as the row's kind says (``Field.annotation``: a closed set of choices is a ``Literal``); None means not given.
``evaluate(**settings: Unpack[EvaluateSettings])`` lets mypy refuse ``evaluate(sampels=3)`` and
``evaluate(top_p="high")``. A test (``tests/test_settings.py``) keeps these keys and types equal to the
table's, so a new row fails until it is written here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict


class EvaluateSettings(TypedDict, total=False):
    """The settings ``polytox.evaluate`` takes as keywords (docs/settings.md)."""

    prompts: str | None
    format: Literal["auto", "rtp", "ptp", "rtplx", "generic", "demo"] | None
    hf_config: str | None
    hf_split: str | None
    limit: int | None
    lang: str | Sequence[str] | None
    per_bucket: int | None
    skip_bad: bool | None
    unprompted: int | None
    model: str | None
    backend: str | None
    model_opt: Mapping[str, Any] | Sequence[str] | None
    samples: int | None
    max_new_tokens: int | None
    temperature: float | None
    top_p: float | None
    top_k: int | None
    batch_size: int | None
    chat_template: Literal["auto", "always", "never"] | None
    device: str | None
    dtype: str | None
    detox: str | None
    scorer: str | None
    scorer_opt: Mapping[str, Any] | Sequence[str] | None
    threshold: float | None
    comparison: Literal[">=", ">"] | None
    n_bootstrap: int | None
    seed: int | None
    shard_size: int | None
    preset: Literal["rtp", "ptp"] | None
    fluency_model: str | None
    fluency_samples: int | None
    ray_address: str | None
    workers: int | None
    score_workers: int | None
    gpus_per_worker: float | None
    score_gpus_per_worker: float | None
    cpus_per_worker: float | None
    queue_depth: int | None
