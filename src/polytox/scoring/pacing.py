"""Pacing for quota-limited APIs (Perspective): the token bucket of ``polytox._util.ratelimit`` whose rate
adapts to what the server says.

Every HTTP request, retries included, takes one token before it is sent, so many worker threads together
never exceed the rate. The rate adapts (additive increase, multiplicative decrease): repeated 429s lower
it, successes raise it back towards the configured rate, so a quota smaller than the one configured costs
a few 429s instead of half the requests. A lone 429 (scheduling jitter at a one-second window's edge, on a
correctly configured quota) only drops the saved-up burst: slowing down for it would waste quota.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from .._util.ratelimit import TokenBucket


class AdaptiveTokenBucket(TokenBucket):
    """``acquire()`` blocks until the caller may send one request at ``rate`` per second; ``on_throttled``
    and ``on_success`` move the rate between ``rate * min_rate_share`` and ``rate``."""

    def __init__(
        self,
        rate: float,
        capacity: float = 1.0,
        *,
        min_rate_share: float = 0.25,
        decrease: float = 0.9,
        increase_share: float = 0.005,
        window: int = 20,
        throttled_to_slow: int = 2,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        super().__init__(rate, capacity, clock=clock, sleep=sleep)
        self.target_rate = float(rate)
        self.min_rate = rate * min_rate_share
        self.decrease = decrease
        self.increase = rate * increase_share
        self._recent: deque[bool] = deque(maxlen=window)  # last outcomes: True = throttled
        self.throttled_to_slow = throttled_to_slow

    def on_throttled(self) -> None:
        """The server answered 429: drop any saved-up burst; on repeated 429s also slow down."""
        with self._lock:
            self._refill(self._clock())
            self._tokens = min(self._tokens, 0.0)
            self._recent.append(True)
            if sum(self._recent) >= self.throttled_to_slow:
                self.rate = max(self.min_rate, self.rate * self.decrease)

    def on_success(self) -> None:
        """A request went through: creep back towards the configured rate (additive increase)."""
        with self._lock:
            self._recent.append(False)
            if self.rate < self.target_rate:
                self._refill(self._clock())
                self.rate = min(self.target_rate, self.rate + self.increase)
