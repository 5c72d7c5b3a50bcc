"""Whether scores computed now may be written down: the score cache and a scorer's response archive.

``polytox serve`` honours a request's ``doNotStore: true`` by scoring its texts inside ``no_store()``:
``CachedScorer`` then reads the cache (a hit is returned) but writes nothing, and the Perspective scorer
archives no response. A context variable, so the flag follows the call into a scorer's worker threads
when it is carried there (``contextvars.copy_context``), and never leaks to other calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_STORE: ContextVar[bool] = ContextVar("polytox_store_scores", default=True)


def storing() -> bool:
    """False inside ``no_store()``: nothing computed now may be written to a cache or archive."""
    return _STORE.get()


@contextmanager
def no_store() -> Iterator[None]:
    """Score without writing anything down (a request's ``doNotStore``)."""
    token = _STORE.set(False)
    try:
        yield
    finally:
        _STORE.reset(token)
