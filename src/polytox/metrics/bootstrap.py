"""Percentile bootstrap CIs of column means, resampling prompts with replacement from a seeded generator.

The resampled indices are exactly those of ``np.random.default_rng(seed).integers(0, n, size=(n_boot, n),
dtype=np.int32)``, and each resample's mean is summed in the same order as a row of that matrix, so the
intervals are what the textbook version gives, bit for bit. They are computed faster:

- NumPy draws a bounded int32 with Lemire's method: the 32-bit word ``u`` of the generator's stream (each
  64-bit output split low half first) gives ``(u * n) >> 32`` unless ``(u * n) mod 2**32 < 2**32 mod n``,
  when the word is skipped. ``Draws`` reproduces that with whole-array operations on the raw stream, so a
  draw costs a multiply and a shift instead of a call into the generator per index;
- every block of a metrics report (overall, each group of each split) is seeded alike, so they all map the
  same raw words: the stream is drawn once and fed to every block;
- two float columns are gathered together as the two halves of a complex array, one random access per
  index instead of two; a 0/1 column is gathered as booleans and counted (its mean is an exact integer
  over n);
- a 0/1 column that is a threshold of a float column (EP's flag is ``max_tox >= threshold``: every flagged
  row's value above every other row's) is not gathered at all: its count in a resample is the count of
  gathered values at or above the smallest flagged value, the same integer;
- a long row is counted on its own (``count_nonzero`` of one row is a popcount; along an axis it is a sum).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence

import numpy as np

from .._util.ranges import RESAMPLES, check_range

# 32-bit words of the stream per step (4 MB as 64-bit words): measured faster than 256K, 1M or 2M words
# on this project's machine (docs/benchmarks.md, "Metrics").
_CHUNK = 1 << 19
# Values gathered per reduction: whole resamples, at least one; small groups take many resamples at once.
_GATHER_ELEMENTS = 1 << 17
# Words screened per minimum when looking for the rare words Lemire's method skips.
_SCREEN = 1 << 12
# Resamples at least this long have their 0/1 counts taken one row at a time.
_ROW_COUNT = 1 << 12


def stream(seed: int) -> Iterator[np.ndarray]:
    """The next ``_CHUNK`` 32-bit words of ``default_rng(seed)``'s stream, in the order ``integers`` reads
    them, one chunk per ``next``, widened to 64 bits once for every block that maps them. The same array is
    refilled by the next ``next``."""
    rng = np.random.default_rng(seed)
    words = np.empty(_CHUNK, dtype=np.uint64)  # one buffer, refilled: each chunk is used up before the next
    while True:
        raw = rng.bit_generator.random_raw(_CHUNK // 2)
        if sys.byteorder == "little":
            words[:] = raw.view(np.uint32)
        else:  # the low half of each output first, as the generator hands them out
            words[0::2] = raw & 0xFFFFFFFF
            words[1::2] = raw >> 32
        yield words


def lemire_indices(words: np.ndarray, n: int, scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(u * n) >> 32`` of each 32-bit word ``u`` (given as uint64), as int64 in ``scratch``, and the
    positions of the words Lemire's method skips: those whose low product half is below ``2**32 mod n``
    (rare: fewer than n in 2**32), found by screening blocks of words by their minimum first."""
    product = scratch[: len(words)]
    np.multiply(words, np.uint64(n), out=product)
    threshold = (1 << 32) % n
    found: list[np.ndarray] = []
    if threshold:
        low = product.view(np.uint32)[0::2] if sys.byteorder == "little" else product & 0xFFFFFFFF
        size = len(low) - len(low) % _SCREEN
        if size:
            suspects = np.flatnonzero(low[:size].reshape(-1, _SCREEN).min(axis=1) < threshold)
            found += [np.flatnonzero(low[b * _SCREEN : (b + 1) * _SCREEN] < threshold) + b * _SCREEN for b in suspects]
        if size < len(low):
            found.append(np.flatnonzero(low[size:] < threshold) + size)
    np.right_shift(product, np.uint64(32), out=product)
    skipped = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    return product.view(np.int64), skipped


class Draws:
    """One block's resample means, filled from the shared stream of 32-bit words (``feed``) until its
    ``n_boot`` resamples of ``n`` indices are complete (``done``); ``means`` is (columns x n_boot)."""

    def __init__(self, columns: Sequence[np.ndarray], n_boot: int) -> None:
        data = [np.ascontiguousarray(c, dtype=np.float64) for c in columns]
        self.n = n = len(data[0])
        self.n_boot = n_boot
        self.means = np.empty((len(data), n_boot))
        self.done = n_boot == 0
        self.filled = 0  # resamples complete
        if n == 1:  # NumPy draws nothing for a range of one: every resample is the one value
            self.means[:] = np.asarray([d[0] for d in data])[:, None]
            self.done = True
            return
        flag_cols = [i for i, d in enumerate(data) if bool(np.all((d == 0.0) | (d == 1.0)))]
        float_cols = [i for i in range(len(data)) if i not in flag_cols]
        # (source, its columns): complex pairs of float columns, a float column alone, a 0/1 column
        self.sources: list[tuple[np.ndarray, list[int]]] = []
        for j in range(0, len(float_cols) - 1, 2):
            pair = np.empty(n, dtype=np.complex128)
            pair.real, pair.imag = data[float_cols[j]], data[float_cols[j + 1]]
            self.sources.append((pair, float_cols[j : j + 2]))
        if len(float_cols) % 2:
            self.sources.append((data[float_cols[-1]], float_cols[-1:]))
        # (flag column, float column, its smallest flagged value): flags counted from a gathered column
        self.cuts: list[tuple[int, int, float]] = []
        for i in flag_cols:
            cut = _threshold_of(data[i], [(c, data[c]) for c in float_cols[: len(float_cols) - len(float_cols) % 2]])
            if cut is None:
                self.sources.append((data[i].astype(bool), [i]))
            else:
                self.cuts.append((i, *cut))
        self.rows = max(1, _GATHER_ELEMENTS // n)
        self.buffers = [np.empty(self.rows * n, dtype=src.dtype) for src, _ in self.sources]
        self.above = np.empty(self.rows * n if self.cuts else 0, dtype=bool)
        self.pos = 0  # values gathered into the buffers

    def feed(self, words: np.ndarray, scratch: np.ndarray) -> None:
        """Map the next words of the stream to indices (skipping those Lemire's method skips) and gather;
        ``scratch``: a 64-bit buffer as long as ``words``, shared by the blocks fed in turn."""
        if self.done:
            return
        indices, skipped = lemire_indices(words, self.n, scratch)
        start = 0
        for stop in (*skipped.tolist(), len(words)):
            self._gather(indices[start:stop])
            if self.done:
                return
            start = stop + 1

    def _gather(self, indices: np.ndarray) -> None:
        """Gather ``indices``' values into the buffers, reducing each time they hold their resamples."""
        while len(indices) and not self.done:
            rows = min(self.rows, self.n_boot - self.filled)
            k = min(rows * self.n - self.pos, len(indices))
            for (source, _), buffer in zip(self.sources, self.buffers, strict=True):
                np.take(source, indices[:k], out=buffer[self.pos : self.pos + k], mode="clip")  # in range
            self.pos += k
            indices = indices[k:]
            if self.pos == rows * self.n:
                self._reduce(rows)

    def _reduce(self, rows: int) -> None:
        """Each complete resample's mean: a row of ``n`` values summed as NumPy sums a matrix row."""
        done = slice(self.filled, self.filled + rows)
        for (source, cols), buffer in zip(self.sources, self.buffers, strict=True):
            values = buffer[: rows * self.n].reshape(rows, self.n)
            if source.dtype == np.complex128:  # sums over n, as ``mean`` computes them
                self.means[cols[0], done] = np.add.reduce(values.real, axis=1) / self.n
                self.means[cols[1], done] = np.add.reduce(values.imag, axis=1) / self.n
                for flag, col, cut in self.cuts:
                    if col in cols:
                        part = values.real if col == cols[0] else values.imag
                        above = np.greater_equal(part, cut, out=self.above[: rows * self.n].reshape(rows, self.n))
                        self.means[flag, done] = _count_rows(above) / self.n
            elif source.dtype == np.bool_:
                self.means[cols[0], done] = _count_rows(values) / self.n
            else:
                self.means[cols[0], done] = np.add.reduce(values, axis=1) / self.n
        self.filled += rows
        self.pos = 0
        self.done = self.filled == self.n_boot


def _threshold_of(flags: np.ndarray, columns: Sequence[tuple[int, np.ndarray]]) -> tuple[int, float] | None:
    """(column, cut) when ``flags`` is exactly ``column >= cut`` on every row (``cut``: the smallest
    flagged value, strictly above every unflagged one), for the first such column; else None."""
    on = flags == 1.0
    for c, values in columns:
        if np.isnan(values).any():
            continue
        cut = float(values[on].min()) if on.any() else math.inf  # no row flagged: no value reaches inf
        if on.all() or cut > float(values[~on].max()):
            return c, cut
    return None


def _count_rows(flags: np.ndarray) -> np.ndarray:
    """Each row's count of True: one popcount per row when rows are long, else a sum along the axis."""
    if flags.shape[1] >= _ROW_COUNT:
        return np.array([np.count_nonzero(row) for row in flags], dtype=np.int64)
    return np.count_nonzero(flags, axis=1)


def _means_int64(columns: Sequence[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """More than 2**31 - 1 rows: NumPy draws int64 indices, another method; one resample at a time."""
    rng = np.random.default_rng(seed)
    data = [np.ascontiguousarray(c, dtype=np.float64) for c in columns]
    means = np.empty((len(data), n_boot))
    for r in range(n_boot):
        idx = rng.integers(0, len(data[0]), size=(1, len(data[0])), dtype=np.int64)
        for c, column in enumerate(data):
            means[c, r] = column[idx].mean(axis=1)[0]
    return means


def resample_means(blocks: Sequence[Sequence[np.ndarray]], n_boot: int, seed: int) -> list[np.ndarray]:
    """(columns x n_boot) bootstrap means of each block (its columns one value per row), every block's
    resamples drawn as ``default_rng(seed).integers(0, rows, (n_boot, rows), dtype=np.int32)`` draws them,
    from one pass over the stream. A block with no rows gets NaN."""
    check_range("n_bootstrap", n_boot, RESAMPLES)
    out: list[np.ndarray | None] = [None] * len(blocks)
    pending: list[tuple[int, Draws]] = []
    for b, columns in enumerate(blocks):
        n = len(columns[0])
        if n == 0:
            out[b] = np.full((len(columns), max(n_boot, 0)), np.nan)
        elif n > 2**31 - 1:
            out[b] = _means_int64(columns, n_boot, seed)
        else:
            draws = Draws(columns, max(n_boot, 0))
            pending.append((b, draws))
    words = stream(seed)
    active = [d for _, d in pending if not d.done]
    scratch = np.empty(_CHUNK if active else 0, dtype=np.uint64)
    while active:
        chunk = next(words)
        for draws in active:
            draws.feed(chunk, scratch)
        active = [d for d in active if not d.done]
    for b, draws in pending:
        out[b] = draws.means
    return [m for m in out if m is not None]


def percentile_cis(means: np.ndarray, level: float) -> list[list[float]]:
    """The ``level`` percentile interval of each row of resample means."""
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha], axis=1)
    return [[float(a), float(b)] for a, b in zip(lo, hi, strict=True)]


def bootstrap_means(columns: list[np.ndarray], n_boot: int, level: float, seed: int) -> list[list[float]]:
    """Percentile bootstrap CI of the mean of each column, resampling prompts (rows) with replacement.

    The same resampled row indices serve every column, so the intervals are consistent with each other.
    """
    check_range("n_bootstrap", n_boot, RESAMPLES)
    if len(columns[0]) == 0 or n_boot <= 0:
        return [[float("nan"), float("nan")] for _ in columns]
    return percentile_cis(resample_means([columns], n_boot, seed)[0], level)
