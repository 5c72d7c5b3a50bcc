"""Character n-gram features: hashed (no vocabulary to ship), sublinear tf, idf, L2-normalised.

Hashing keeps the committed head small: the idf and the ridge weights are one float16 each per bucket,
and no n-gram strings are stored. ``char_wb`` n-grams (inside word boundaries, padded with spaces) work for
every script PTP covers, including zh/ja, where a "word" is a whole clause and the n-grams slide over it.
"""

from __future__ import annotations

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


def hashed_counts(texts: Sequence[str], config: NgramConfig) -> Any:
    """Sparse (n, n_features) matrix of raw n-gram counts."""
    text_mod = require("sklearn.feature_extraction.text", "ml")
    vectorizer = text_mod.HashingVectorizer(
        analyzer="char_wb", ngram_range=(config.ngram_min, config.ngram_max), n_features=config.n_features,
        alternate_sign=False, norm=None, lowercase=True, dtype=np.float32)
    return vectorizer.transform(list(texts)).tocsr()


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
