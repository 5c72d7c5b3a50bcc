"""API keys and per-key quotas, the way Perspective meters them.

Keys come from the environment variable ``POLYTOX_SERVE_KEYS`` (comma-separated) or a file (one key per
line, ``#`` comments), never from a command-line argument (shell history) and are never logged: the
server logs requests without their query string, and errors never echo a key. With neither configured
the server refuses to start unless it is told to run open (``--open``).

Quotas: one token bucket per key (``polytox._util.ratelimit``: ``qps`` tokens per second, ``burst`` at most),
as Perspective's per-project QPS. Each analyzed comment takes one token (a batch request's sub-requests
each count, as on Perspective); a moderation request with N inputs takes N tokens. The bucket never blocks:
a request that finds it empty is answered 429 with ``Retry-After``.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .._util.ratelimit import TokenBucket
from ..errors import PolytoxError

KEYS_ENV = "POLYTOX_SERVE_KEYS"
OPEN_KEY = "-"  # the quota bucket shared by requests without a key when the server runs open


class KeyStore:
    """Which keys are accepted; ``open`` accepts any request (a key, if sent, still gets its own bucket)."""

    def __init__(self, keys: Iterable[str] = (), open_access: bool = False) -> None:
        self._keys = tuple(k for k in (x.strip() for x in keys) if k)
        self.open = open_access
        if not self._keys and not self.open:
            raise PolytoxError(
                f"no API keys configured: set {KEYS_ENV} (comma-separated), pass --keys-file "
                "FILE (one key per line), or run without keys with --open"
            )

    def __len__(self) -> int:
        return len(self._keys)

    @classmethod
    def load(cls, keys_file: str | None = None, open_access: bool = False) -> KeyStore:
        """Keys from ``POLYTOX_SERVE_KEYS`` and/or ``keys_file``."""
        keys = [k for k in os.environ.get(KEYS_ENV, "").split(",")]
        if keys_file:
            path = Path(keys_file)
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise PolytoxError(f"cannot read the keys file {path}: {exc.strerror}") from None
            keys += [line.split("#", 1)[0] for line in lines]
        return cls(keys, open_access)

    def check(self, key: str | None) -> bool:
        """True when ``key`` is accepted (constant-time comparison against every configured key)."""
        if self.open:
            return True
        if not key:
            return False
        ok = False
        for known in self._keys:
            ok |= hmac.compare_digest(known.encode(), key.encode())
        return ok


class Quotas:
    """Per-key buckets at ``qps`` (0: unlimited). Thread-safe; the key itself is only a dict key here."""

    def __init__(
        self, qps: float = 0.0, burst: float = 0.0, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000
    ) -> None:
        self.qps = float(qps)
        self.burst = float(burst) if burst > 0 else max(1.0, self.qps)
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()
        self._max_keys = max_keys

    def take(self, key: str | None, n: int = 1) -> float:
        """0.0 when ``key`` may send ``n`` more comments now, else the seconds to wait (-> 429)."""
        if self.qps <= 0:
            return 0.0
        name = key or OPEN_KEY
        with self._lock:
            bucket = self._buckets.get(name)
            if bucket is None:
                if len(self._buckets) >= self._max_keys:  # open servers: bounded memory, however many keys
                    self._buckets.clear()
                bucket = self._buckets[name] = TokenBucket(self.qps, self.burst, clock=self._clock)
            return bucket.take(n)
