"""The training pool: every text the default head is fitted and measured on, in embedding-priority order.

``training_pool`` = RTP-LX (17 languages, human ratings) + shared RTP (Perspective) + the scorer training
pack, thinned per source (``pack.POOL_RATES``), and optionally the everyday sentences' trainable part.
``extract`` embeds the pool into the embedding cache tier by tier, in chunks, so an interrupted extraction
resumes and a partial one still covers what matters most.

Run it in the background before training (``polytox train-scorer-step pool`` calls ``embed_pool``)::

    polytox train-scorer-step pool --shared ../shared/data --layers 5,7,9
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from .data import Example, load_rtp, load_rtplx
from .everyday import everyday_examples
from .pack import POOL_RATES, load_pack, tier, unit_hash

log = logging.getLogger("polytox")


def training_pool(shared: Path | str, langs: Sequence[str] = (), everyday: bool = False) -> list[Example]:
    """All pool rows, sorted by embedding tier (stable within a tier); with ``everyday``, the trainable
    everyday sentences (``everyday.everyday_examples``) too."""
    shared = Path(shared)
    rows = load_pack(shared / "scorer-train") + load_rtp(shared / "rtp") + load_rtplx(shared / "rtp-lx", langs=langs)
    if everyday:
        rows += everyday_examples(shared / "ud-sentences")
    # Within tiers 3-4 rows go in the order of their subsample hash relative to their source's rate: an
    # extraction stopped at a share f of a tier holds exactly the pool made with every rate times f.
    return sorted(rows, key=lambda r: (tier(r), pool_position(r) if tier(r) > 2 else 0.0))


def pool_position(row: Example) -> float:
    """Where ``row`` falls in its source's subsample, 0-1 (it is kept at any rate above this)."""
    rate = POOL_RATES.get(row.source, 1.0)
    return unit_hash(row.group, "pool") / rate if rate > 0 else 1.0


def extract(
    rows: Sequence[Example],
    backbone: str,
    layers: Sequence[int],
    *,
    max_tokens: int = 128,
    batch_size: int = 32,
    cache_path: str | None = None,
    chunk: int = 1000,
    threads: int | None = None,
    max_tier: int = 4,
) -> int:
    """Embed ``rows`` tier by tier into the cache; returns how many texts were computed (cache misses)."""
    from ...scoring.ml.embed_cache import EmbeddingCache
    from ...scoring.ml.embedder import HiddenStateEmbedder

    cache = EmbeddingCache(cache_path)
    embedder = HiddenStateEmbedder(
        backbone, layers, max_tokens=max_tokens, batch_size=batch_size, cache=cache, threads=threads
    )
    started = time.perf_counter()
    try:
        for t in range(1, max_tier + 1):
            texts = [r.text for r in rows if tier(r) == t]
            for start in range(0, len(texts), chunk):
                embedder.embed(texts[start : start + chunk])
                elapsed = time.perf_counter() - started
                print(
                    f"tier {t}: {min(start + chunk, len(texts))}/{len(texts)} computed={embedder.computed} "
                    f"{embedder.computed / max(elapsed, 1e-9):.1f} texts/s",
                    flush=True,
                )
    finally:
        embedder.close()
        cache.close()
    return embedder.computed


def tier_counts(rows: Sequence[Example]) -> dict[int, int]:
    """How many pool rows each embedding tier (1 first) holds."""
    return {t: sum(tier(r) == t for r in rows) for t in range(1, 5)}
