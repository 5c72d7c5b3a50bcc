"""Distinct-n (DExperts §4.1, after Li et al., 2016): how varied a prompt's K continuations are.

Per prompt: the number of distinct n-grams over all its continuations (whitespace tokens, as DExperts'
released evaluation splits on spaces) divided by their total number of words; then the mean over
prompts. Failed generations are left out and counted, never read as empty text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .. import constants as C


def distinct_n(texts: Sequence[str], ns: Iterable[int] = C.DISTINCT_N) -> dict[int, float] | None:
    """distinct-n of one prompt's continuations; None when they hold no words at all."""
    words = [t.split(" ") for t in texts]
    total = sum(len(w) for w in words)
    if total == 0:
        return None
    out = {}
    for n in ns:
        # the n-grams of w: zip of w shifted by 0..n-1 (the tuples slicing would give, built in C); the
        # words themselves for n = 1
        grams: set[object] = set().union(*words) if n == 1 else set()
        for w in words if n > 1 else ():
            grams.update(zip(*[w[i:] for i in range(n)], strict=False))
        out[n] = len(grams) / total
    return out


def diversity(per_prompt: dict[str, list[str | None]], ns: Sequence[int] = C.DISTINCT_N) -> dict[str, Any]:
    """Mean distinct-n over prompts, from each prompt's continuations (None = failed generation)."""
    values: dict[int, list[float]] = {n: [] for n in ns}
    missing = 0
    for texts in per_prompt.values():
        ok = [t for t in texts if t is not None]
        missing += len(texts) - len(ok)
        d = distinct_n(ok, ns)
        if d is not None:
            for n in ns:
                values[n].append(d[n])
    out: dict[str, Any] = {f"dist_{n}": (sum(v) / len(v) if v else None) for n, v in values.items()}
    out.update(n_prompts=len(values[ns[0]]) if ns else 0, n_failed_generations=missing, tokens="whitespace")
    return out
