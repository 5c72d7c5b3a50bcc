"""The rows the named scales are fitted and measured on, each with its Perspective era and split.

A scale is fitted on the head's *raw* output (the combiner's probability before any map), so the rows here
are pool rows (``pool.training_pool``) with a stated target:

- ``perspective-2020``: RTP's 2020 scores (quark, fgdilp, shared ``rtp/``), all web text;
- ``perspective-2022``: IA024's 2022 scores, all model continuations;
- ``unknown``: DeStein's re-scoring by "a later Perspective model" (the source states no year), measured
  for information, never fitted on;
- ``raters``: RTP-LX rows, target the share of the 3 raters rating >= 3;
- the same RTP-LX rows carry their mean rating: with ``Index`` it pairs each translation with its English
  text, what the cross-language maps are fitted on (``scale_languages.py``);
- anchored RTP-LX rows: every translation of an RTP-LX ``Index`` whose English prompt carries a Perspective
  score, with that English source's score and era as the target (the cross-language scales).

The split is the head's own (``pack.heldout_mask`` over the whole pool), so scales are fitted on the
training split only and measured on the held-out split. ``write_raw_outputs`` (``polytox train-scorer-step
scale-rows``) writes every such row's raw output of the committed head to parquet parts (a backbone pass per
text; it resumes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .data import Example
from .pack import heldout_mask, normalise_text
from .pool import training_pool

ERA_2020, ERA_2022, ERA_UNKNOWN = "perspective-2020", "perspective-2022", "unknown"
RATERS = "raters"


def era_of(ex: Example) -> str | None:
    """The Perspective era a row's score was read in, as its source states it; None for unscored rows."""
    if ex.domain != "perspective":
        return None
    if ex.source.startswith("destein"):
        return ERA_UNKNOWN  # "re-scored by a later Perspective model": no year is stated
    if ex.source.startswith("ia024"):
        return ERA_2022
    return ERA_2020  # quark, fgdilp, shared rtp/: RealToxicityPrompts' 2020 scores


@dataclass(frozen=True)
class ScaleRow:
    """One text the scales are fitted or measured on."""

    text: str
    lang: str
    kind: str  # "web" | "continuation"
    target: str  # an era, "raters", or "anchor:<era>" (the English source's Perspective score)
    value: float
    heldout: bool
    group: str  # the joined split group (bootstrap unit)
    source: str
    prompt: str = ""  # the prompt a model continuation answers (EMT / EP / AT of a real run); RTP-LX: Index
    label: bool | None = None  # RTP-LX rows: mean human rating >= 3 (the card's human label)
    rating: float | None = None  # RTP-LX rows: the mean of the three Toxicity ratings (1-5)


def _anchors(rows: Sequence[Example]) -> dict[str, dict[str, float]]:
    """Normalised English text -> {era: mean Perspective score} over the Perspective-scored rows."""
    acc: dict[str, dict[str, list[float]]] = {}
    for ex in rows:
        era = era_of(ex)
        if era is None or ex.lang != "en":
            continue
        acc.setdefault(normalise_text(ex.text), {}).setdefault(era, []).append(ex.target)
    return {k: {era: float(np.mean(v)) for era, v in d.items()} for k, d in acc.items()}


def scale_rows(shared: Path | str) -> list[ScaleRow]:
    """Every row a scale is fitted or measured on (see the module docstring)."""
    pool = training_pool(shared)
    held = heldout_mask(pool)
    from .pack import join_components

    groups = join_components(pool)
    anchors = _anchors(pool)
    english_of_index: dict[str, str] = {}
    for ex in pool:
        if ex.source == "rtp-lx" and ex.lang == "en":
            english_of_index[ex.group] = normalise_text(ex.text)
    out: list[ScaleRow] = []
    for ex, h, g in zip(pool, held, groups, strict=True):
        era = era_of(ex)
        if era is not None:
            kind = "continuation" if ex.kind == "generation" else "web"
            prompt = ex.group if ex.kind == "generation" else ""
            out.append(ScaleRow(ex.text, ex.lang, kind, era, ex.target, h, g, ex.source, prompt))
        elif ex.source == "rtp-lx":
            if ex.share is not None:
                out.append(
                    ScaleRow(ex.text, ex.lang, "web", RATERS, ex.share, h, g, ex.source, ex.group, ex.label, ex.rating)
                )
            for anchor_era, value in anchors.get(english_of_index.get(ex.group, ""), {}).items():
                out.append(ScaleRow(ex.text, ex.lang, "web", f"anchor:{anchor_era}", value, h, g, ex.source, ex.group))
    return out


def priority(row: ScaleRow) -> int:
    """Extraction order: what the fits and the held-out measurements need most comes first."""
    if row.target == ERA_2022:
        return 0
    if row.target.startswith("anchor:") or row.target == RATERS:
        return 1
    if row.target == ERA_2020 and row.heldout:
        return 2
    if row.target == ERA_UNKNOWN and row.heldout:
        return 3
    return 4


def raw_outputs(
    texts: Sequence[str], langs: Sequence[str], mode: str = "full", threads: int = 1, batch: int = 256
) -> np.ndarray:
    """The committed head's raw output (before any map) of each text, float32 backbone on the CPU."""
    import torch

    torch.set_num_threads(threads)
    from ...scoring.ml.scorer import PolytoxMlScorer

    scorer = PolytoxMlScorer(mode=mode, device="cpu", dtype="float32")
    out = np.empty(len(texts))
    try:
        for start in range(0, len(texts), batch):
            out[start : start + batch] = scorer.raw_batch(texts[start : start + batch], langs[start : start + batch])
    finally:
        scorer.close()
    return out


def write_raw_outputs(
    shared: Path | str,
    out: Path | str,
    *,
    mode: str = "full",
    chunk: int = 1000,
    threads: int = 1,
    max_priority: int = 4,
    say: Callable[[str], None] = lambda line: None,
) -> int:
    """Write the committed head's raw output (mode ``mode``) of every scale row's text of priority at most
    ``max_priority`` to ``out/part-NNNN-MODE.parquet``, ``chunk`` texts a part; parts already there are kept
    (a run resumes). ``say`` gets a progress line per part. Returns how many distinct texts there are."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = scale_rows(shared)
    # one backbone pass per (text, lang): a text anchored to several eras is read once
    seen: dict[tuple[str, str], int] = {}
    for r in sorted(rows, key=priority):
        if priority(r) <= max_priority:
            seen.setdefault((r.text, r.lang), priority(r))
    todo = list(seen)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    say(f"{len(rows)} rows, {len(todo)} distinct texts")
    for n, start in enumerate(range(0, len(todo), chunk)):
        part = folder / f"part-{n:04d}-{mode}.parquet"
        if part.exists():
            continue
        texts = todo[start : start + chunk]
        raw = raw_outputs([t for t, _ in texts], [lang for _, lang in texts], mode, threads)
        table = pa.table({"text": [t for t, _ in texts], "lang": [lang for _, lang in texts], "raw": raw})
        pq.write_table(table, str(part) + ".tmp")
        Path(str(part) + ".tmp").rename(part)
        say(f"{start + len(texts)}/{len(todo)} {time.perf_counter() - started:.0f}s")
    return len(todo)
