"""MinHash band keys and the per-band join: a leaf shared by the local LSH index and the Ray band join.

``band_key`` is the hash ``datasketch.MinHashLSH`` is given for a band's bytes; ``band_join`` pairs the
documents of A and B whose band is equal, which is what one band of the LSH index finds.
"""

from __future__ import annotations

import hashlib

import numpy as np


def band_key(data: bytes) -> bytes:
    """A band's bytes as a 64-bit key (``MinHashLSH(hashfunc=...)``); a collision only adds a candidate,
    which the exact Jaccard check then rejects."""
    return hashlib.blake2b(data, digest_size=8).digest()


def band_join(
    band: int, a_keys: np.ndarray, a_band: np.ndarray, b_keys: np.ndarray, b_band: np.ndarray
) -> list[tuple[int, int]]:
    """Pairs (a key, b key) whose band ``band`` bytes are equal."""
    buckets: dict[bytes, list[int]] = {}
    for key, row in zip(a_keys.tolist(), a_band, strict=True):  # the bytes datasketch's index hashes
        buckets.setdefault(band_key(bytes(row.byteswap().data)), []).append(key)
    pairs: list[tuple[int, int]] = []
    for key, row in zip(b_keys.tolist(), b_band, strict=True):
        for a_key in buckets.get(band_key(bytes(row.byteswap().data)), ()):
            pairs.append((a_key, key))
    return pairs
