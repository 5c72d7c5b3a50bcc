"""Character n-gram features: hashed (no vocabulary to ship), sublinear tf, idf, L2-normalised.

Hashing keeps the committed head small: the idf and the ridge weights are one float16 each per bucket,
and no n-gram strings are stored. ``char_wb`` n-grams (inside word boundaries, padded with spaces) work for
every script PTP covers, including zh/ja, where a "word" is a whole clause and the n-grams slide over it.

Speed: ``char_wb`` n-grams never cross a word boundary, so a text's counts are the sum of its words'
counts. ``hashed_counts`` hashes each *distinct* word once (scikit-learn's own ``HashingVectorizer``, so
the hash and the n-gram rules are scikit-learn's), keeps the word rows between batches, and adds a batch's
rows up with one sparse product: words repeat (Zipf), so most words of a continuation are already
hashed. ``hashed_counts_reference`` is the plain one-pass ``HashingVectorizer`` over whole texts, kept as
the benchmark baseline; the two give identical matrices (tests/test_scorer_speed.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import require


@dataclass(frozen=True)
class NgramConfig:
    """How texts become hashed n-gram counts (recorded in the head, so scoring hashes as training did)."""

    ngram_min: int = 1
    ngram_max: int = 5
    n_features: int = 2**17

    def to_dict(self) -> dict[str, int]:
        return {"ngram_min": self.ngram_min, "ngram_max": self.ngram_max, "n_features": self.n_features}


def _vectorizer(config: NgramConfig, lowercase: bool) -> Any:
    text_mod = require("sklearn.feature_extraction.text", "ml")
    return text_mod.HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(config.ngram_min, config.ngram_max),
        n_features=config.n_features,
        alternate_sign=False,
        norm=None,
        lowercase=lowercase,
        dtype=np.float32,
    )


def hashed_counts_reference(texts: Sequence[str], config: NgramConfig) -> Any:
    """Sparse (n, n_features) raw n-gram counts: one ``HashingVectorizer`` pass over whole texts.

    The original implementation, kept as the baseline of ``benchmarks/bench_scorer.py`` and the oracle of
    the equality test."""
    return _vectorizer(config, lowercase=True).transform(list(texts)).tocsr()


class WordHasher:
    """Hashed ``char_wb`` counts of texts, built from a table of per-word rows kept between calls.

    scikit-learn lowercases the whole text, collapses whitespace runs and splits on whitespace before
    building the ``char_wb`` n-grams of each word; ``text.lower().split()`` yields the same words, so the
    counts of a text are the sum of its words' rows. Words not yet in the table are hashed by
    scikit-learn (one call per batch) and appended; the table is emptied when it exceeds ``max_words``.
    Thread-safe (one lock: the word loop holds the GIL anyway).
    """

    def __init__(self, config: NgramConfig, max_words: int = 200_000) -> None:
        self.config = config
        self.max_words = max_words
        self._vectorizer = _vectorizer(config, lowercase=False)  # words are lowercased with their text
        self._vocab: dict[str, int] = {}
        self._rows: Any = None
        self._lock = threading.Lock()

    def counts(self, texts: Sequence[str]) -> Any:
        sparse = require("scipy.sparse", "ml", "scipy")
        with self._lock:
            if len(self._vocab) > self.max_words:
                self._vocab, self._rows = {}, None
            vocab = self._vocab
            known = len(vocab)
            columns: list[int] = []
            indptr = np.zeros(len(texts) + 1, dtype=np.int64)
            for row, text in enumerate(texts):
                columns.extend([vocab.setdefault(w, len(vocab)) for w in text.lower().split()])
                indptr[row + 1] = len(columns)
            if len(vocab) > known:
                fresh = self._vectorizer.transform(list(vocab)[known:]).tocsr()
                self._rows = fresh if self._rows is None else sparse.vstack([self._rows, fresh], format="csr")
            table = self._rows
        if table is None:  # no words at all
            return sparse.csr_matrix((len(texts), self.config.n_features), dtype=np.float32)
        occurrences = sparse.csr_matrix(
            (np.ones(len(columns), dtype=np.float32), np.asarray(columns, dtype=np.int64), indptr),
            shape=(len(texts), table.shape[0]),
        )
        counts = (occurrences @ table).tocsr()
        counts.sum_duplicates()  # canonical form (sorted indices, no duplicates), like the reference
        return counts


_HASHERS: dict[NgramConfig, WordHasher] = {}
_HASHERS_LOCK = threading.Lock()


def word_hasher(config: NgramConfig) -> WordHasher:
    """The process-wide ``WordHasher`` of ``config`` (its word table serves every later batch)."""
    with _HASHERS_LOCK:
        if config not in _HASHERS:
            _HASHERS[config] = WordHasher(config)
        return _HASHERS[config]


def hashed_counts(texts: Sequence[str], config: NgramConfig) -> Any:
    """Sparse (n, n_features) float32 matrix of raw n-gram counts, identical to the reference path."""
    return word_hasher(config).counts(list(texts))


def fit_idf(counts: Any) -> np.ndarray:
    """Smoothed idf per bucket, as scikit-learn's ``TfidfTransformer(smooth_idf=True)``."""
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    return (np.log((1.0 + n_docs) / (1.0 + df)) + 1.0).astype(np.float32)


def tfidf(counts: Any, idf: np.ndarray) -> Any:
    """Sublinear tf (1 + log count) times idf, rows L2-normalised; returns a new sparse matrix."""
    x = counts.copy().astype(np.float32)
    x.data = (1.0 + np.log(x.data)) * idf[x.indices]
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    row_of = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
    x.data /= norms[row_of]
    return x
