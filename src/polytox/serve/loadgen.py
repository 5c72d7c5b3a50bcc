"""A small closed-loop load generator for ``polytox serve`` (tests, ``benchmarks/bench_serve.py``).

``concurrency`` threads each keep one HTTP/1.1 connection open and send ``comments:analyze`` requests
back to back (optionally paced to a total rate). Every answer is checked against the score expected for
its own text, so a response given to the wrong request is counted, not missed.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np


@dataclass
class LoadResult:
    concurrency: int
    elapsed_s: float
    statuses: Counter[int] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)  # of 200 answers
    mismatched: int = 0  # 200 answers whose value is not the one expected for their text (beyond tolerance)
    max_diff: float = 0.0  # largest |answer - expected| over 200 answers
    transport_errors: int = 0
    no_retry_after: int = 0  # 429 and 503 answers without a Retry-After header

    @property
    def ok(self) -> int:
        return self.statuses[200]

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000) if self.latencies_s else float("nan")


def run_load(
    url: str,
    texts: Sequence[str],
    *,
    concurrency: int,
    requests: int = 0,
    duration_s: float = 0.0,
    key: str | None = None,
    lang: str | None = "en",
    expected: Mapping[str, float] | None = None,
    rate: float = 0.0,
    timeout: float = 60.0,
    tolerance: float = 0.0,
) -> LoadResult:
    """Send ``requests`` requests (or for ``duration_s``) from ``concurrency`` threads; ``rate`` > 0 paces
    the total to that many requests per second. An answer further than ``tolerance`` from its text's
    expected value counts as mismatched (0: exact; a transformer scorer's value moves by ~1e-6 with the
    padding of the batch it was scored in)."""
    if not requests and not duration_s:
        raise ValueError("give requests or duration_s")
    parts = urlsplit(url)
    path = "/v1alpha1/comments:analyze" + (f"?key={key}" if key else "")
    lock = threading.Lock()
    result = LoadResult(concurrency=concurrency, elapsed_s=0.0)
    counter = [0]
    start = time.perf_counter()
    deadline = start + duration_s if duration_s else float("inf")

    def next_index() -> int | None:
        with lock:
            i = counter[0]
            if (requests and i >= requests) or time.perf_counter() >= deadline:
                return None
            counter[0] += 1
            return i

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        while (i := next_index()) is not None:
            if rate > 0:
                due = start + i / rate
                if (wait := due - time.perf_counter()) > 0:
                    time.sleep(wait)
            text = texts[i % len(texts)]
            body = {"comment": {"text": text}, "requestedAttributes": {"TOXICITY": {}}}
            if lang:
                body["languages"] = [lang]
            sent = time.perf_counter()
            try:
                conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
                with lock:
                    result.transport_errors += 1
                continue
            took = time.perf_counter() - sent
            bad, diff = False, 0.0
            if resp.status == 200 and expected is not None:
                value = json.loads(payload)["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
                diff = abs(value - expected[text])
                bad = diff > tolerance
            with lock:
                result.statuses[resp.status] += 1
                result.no_retry_after += resp.status in (429, 503) and resp.getheader("retry-after") is None
                if resp.status == 200:
                    result.latencies_s.append(took)
                result.mismatched += bad
                result.max_diff = max(result.max_diff, diff)
        conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.elapsed_s = time.perf_counter() - start
    return result
