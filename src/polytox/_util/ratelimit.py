"""A thread-safe token bucket: at most ``rate`` acquisitions per second on average, bursts up to ``burst``.

Used by HTTP clients that run requests from a thread pool, so the limit holds across all their threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """``acquire()`` blocks until a token is free; ``rate <= 0`` means unlimited."""

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, sleeping as needed; returns the seconds waited."""
        if self.rate <= 0:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return waited
                delay = (1 - self._tokens) / self.rate
            self._sleep(delay)
            waited += delay
