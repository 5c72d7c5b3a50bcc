"""The one token bucket of polytox: ``rate`` tokens per second, at most ``capacity`` saved up.

Two ways to use it:

- ``acquire()`` blocks until the caller may go (HTTP clients that send from a thread pool: the openai
  backend, the Perspective scorer through ``scoring.pacing``). Tokens are reserved in arrival order (the
  count may go negative: a waiter owns the next free slot), which spaces requests evenly instead of letting
  them bunch up at a refill;
- ``take(n)`` never blocks: it grants ``n`` tokens or says how long until it would (the quotas of
  ``polytox serve``, which answer 429 instead of waiting). A request for more tokens than the bucket holds
  goes into debt, so a large batch is paid for by the requests after it instead of being impossible.

Thread-safe. ``rate <= 0`` means unlimited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, ``capacity`` at most (at least 1); starts full."""

    def __init__(
        self,
        rate: float,
        capacity: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = float(rate)
        self.capacity = max(1.0, float(capacity))
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._last = clock()
        self.acquired = 0  # acquisitions so far (for the manifest and tests)
        self.waited_s = 0.0  # seconds they waited in all

    def _refill(self, now: float) -> None:
        """Add the tokens earned since the last call (under the lock)."""
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def acquire(self) -> float:
        """Take one token, sleeping until it is due; returns the seconds waited."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            self._refill(self._clock())
            self._tokens -= 1.0
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.acquired += 1
            self.waited_s += wait
        if wait > 0:
            self._sleep(wait)
        return wait

    def take(self, n: int = 1) -> float:
        """0.0 when ``n`` tokens are granted (``min(n, capacity)`` must be there), else the seconds until they
        would be; never blocks."""
        if self.rate <= 0:
            return 0.0
        with self._lock:
            self._refill(self._clock())
            need = min(float(n), self.capacity)
            if self._tokens >= need:
                self._tokens -= n
                return 0.0
            return (need - self._tokens) / self.rate
