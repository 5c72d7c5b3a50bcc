"""The embedder's previous path, kept as the baseline of ``bench_scorer.py`` and the oracle of
``tests/test_scorer_speed.py``: one tokenizer call per text, per-text dictionaries and Python padding loops.

``HiddenStateEmbedder`` (``polytox.scoring.ml.embedder``) tokenizes a whole call at once and pads with one
vectorised fill; its vectors must equal these. The functions take an embedder and use its model, cache and
forward pass, so only the batching differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from polytox.scoring.ml.attention import AttentionProbe
from polytox.scoring.ml.embedder import HiddenStateEmbedder
from polytox.types import text_hash


def forward_legacy(embedder: HiddenStateEmbedder, batch: list[list[int]], probes: Sequence[AttentionProbe] = ()
                   ) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """The previous batch builder (Python loops over rows), then the embedder's own forward pass."""
    tok: Any = embedder._tok
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    width = max(len(ids) for ids in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, seq in enumerate(batch):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return embedder._forward(ids, mask, probes)


def embed_legacy(embedder: HiddenStateEmbedder, texts: Sequence[str], probes: Sequence[AttentionProbe] = (),
                 progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The previous ``embed``: per-text tokenizer calls and per-text dictionaries. Returns what
    ``embed_and_probe`` returns (so it can stand in for it): the pools, and each probe's scores from the same
    pass (the previous path had no probes; with probes asked the pool cache is neither read nor written)."""
    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), np.zeros((0, len(probes)), dtype=np.float32)
    hashes = [text_hash(t) for t in texts]
    unique = list(dict.fromkeys(hashes))
    use_cache = embedder.cache is not None and not probes
    vectors: dict[int, dict[str, np.ndarray]] = {layer: {} for layer in embedder.layers}
    scored: dict[str, np.ndarray] = {}
    if use_cache:
        assert embedder.cache is not None
        for layer in embedder.layers:
            vectors[layer] = embedder.cache.get_many(embedder.key, layer, unique)
    missing = [h for h in unique if any(h not in vectors[layer] for layer in embedder.layers)]
    if missing:
        embedder._load()
        tok: Any = embedder._tok
        first = {h: i for i, h in reversed(list(enumerate(hashes)))}
        encoded = {h: list(tok(texts[first[h]], truncation=True, max_length=embedder.max_tokens)["input_ids"])
                   for h in missing}
        order = sorted(missing, key=lambda h: len(encoded[h]))
        for start in range(0, len(order), embedder.batch_size):
            chunk = order[start : start + embedder.batch_size]
            pools, scores = forward_legacy(embedder, [encoded[h] for h in chunk], probes)
            rows = []
            for layer in embedder.layers:
                for h, vec in zip(chunk, pools[layer], strict=True):
                    vec16 = vec.astype(np.float16)
                    vectors[layer][h] = vec16
                    rows.append((layer, h, vec16))
            for h, row in zip(chunk, scores, strict=True):
                scored[h] = row.astype(np.float16)
            if use_cache:
                assert embedder.cache is not None
                embedder.cache.put_many(embedder.key, rows)
            embedder.computed += len(chunk)
            if progress is not None:
                progress(min(start + len(chunk), len(order)), len(order))
    out = np.stack([np.concatenate([vectors[layer][h] for layer in embedder.layers]) for h in hashes])
    probe_scores = (np.stack([scored[h] for h in hashes]) if probes
                    else np.zeros((len(texts), 0), dtype=np.float16))
    return out.astype(np.float32), probe_scores.astype(np.float32)
