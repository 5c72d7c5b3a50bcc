"""Prometheus metrics of one server: requests, latency, batch sizes, queue depth, errors.

Each app gets its own ``CollectorRegistry`` (several servers in one process, as in tests, do not
collide); ``/metrics`` exposes it in the text format Prometheus scrapes.
"""

from __future__ import annotations

from typing import Any

from . import INSTALL_HINT

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    def __init__(self) -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:
            raise ImportError(f"polytox serve needs prometheus-client: {INSTALL_HINT}") from exc
        self._prom = prom
        self.registry = prom.CollectorRegistry()
        self.requests = prom.Counter(
            "polytox_serve_requests",
            "HTTP requests by endpoint and status code",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self.latency = prom.Histogram(
            "polytox_serve_request_seconds",
            "Request latency by endpoint",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = prom.Histogram(
            "polytox_serve_batch_size", "Texts per scorer call", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.batch_seconds = prom.Histogram(
            "polytox_serve_batch_seconds", "Scorer time per batch", buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.texts = prom.Counter("polytox_serve_texts", "Texts scored (cache hits included)", registry=self.registry)
        self.errors = prom.Counter(
            "polytox_serve_errors", "Error answers by reason", ["reason"], registry=self.registry
        )
        self.queue_depth = prom.Gauge(
            "polytox_serve_queue_depth", "Texts waiting for the scorer", registry=self.registry
        )
        self.shed = prom.Counter(
            "polytox_serve_shed_texts", "Texts refused for overload (429), not scored", registry=self.registry
        )
        self.in_flight = prom.Gauge("polytox_serve_in_flight", "Requests being handled", registry=self.registry)

    def render(self) -> tuple[bytes, str]:
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST

    def sample(self, name: str, labels: dict[str, str] | None = None) -> Any:
        """One sample's value (tests, benchmarks)."""
        return self.registry.get_sample_value(name, labels or {})
