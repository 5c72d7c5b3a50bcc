"""Exact and near-duplicate counts, the way RTP Appendix D measured corpus overlap.

Exact duplicates: identical text (SHA-256). Near duplicates: 5-character shingles, MinHash with 128
permutations (datasketch, SHA-1), LSH candidates at Jaccard 0.9, each confirmed by the exact Jaccard
similarity of the shingle sets. A record counts once, as a duplicate of an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..constants import NEAR_DUP_JACCARD, NEAR_DUP_PERMUTATIONS, NEAR_DUP_SHINGLE_CHARS
from ..errors import require
from ..types import text_hash


def shingles(text: str, k: int = NEAR_DUP_SHINGLE_CHARS) -> set[str]:
    """Character k-grams (the whole text when shorter than k)."""
    if len(text) <= k:
        return {text}
    return {text[i : i + k] for i in range(len(text) - k + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


@dataclass
class DuplicateCounter:
    """Feed texts one by one; ``exact`` and ``near`` count the ones that repeat an earlier text."""

    threshold: float = NEAR_DUP_JACCARD
    num_perm: int = NEAR_DUP_PERMUTATIONS
    exact: int = 0
    near: int = 0
    n: int = 0
    examples: list[tuple[str, str, float]] = field(default_factory=list)
    _hashes: set[str] = field(default_factory=set)
    _shingles: dict[str, set[str]] = field(default_factory=dict)
    _keys: dict[str, str] = field(default_factory=dict)
    _lsh: object = None

    def add(self, key: str, text: str) -> str | None:
        """Record one text; returns "exact", "near" or None."""
        datasketch = require("datasketch", "build")
        if self._lsh is None:
            self._lsh = datasketch.MinHashLSH(threshold=self.threshold, num_perm=self.num_perm)
        self.n += 1
        digest = text_hash(text)
        if digest in self._hashes:
            self.exact += 1
            return "exact"
        self._hashes.add(digest)
        grams = shingles(text)
        mh = datasketch.MinHash(num_perm=self.num_perm)
        mh.update_batch([g.encode("utf-8", "surrogatepass") for g in grams])
        lsh = self._lsh
        verdict = None
        for other in lsh.query(mh):  # type: ignore[attr-defined]
            similarity = jaccard(grams, self._shingles[other])
            if similarity >= self.threshold:
                self.near += 1
                if len(self.examples) < 5:
                    self.examples.append((key, self._keys[other], round(similarity, 4)))
                verdict = "near"
                break
        internal = str(self.n)  # user keys may repeat; LSH keys must not
        self._shingles[internal] = grams
        self._keys[internal] = key
        lsh.insert(internal, mh)  # type: ignore[attr-defined]
        return verdict
