"""The ASGI app (Starlette): routes, request reading, auth, quotas, and the lifecycle of the batcher.

Routes:

- ``POST /v1alpha1/comments:analyze?key=KEY`` - Perspective (``perspective_api``);
- ``POST /batch`` - Google's multipart batch of analyze calls (``batch_http``);
- ``GET /$discovery/rest?version=v1alpha1`` - the discovery document (``discovery``);
- ``POST /v1/moderations`` - OpenAI moderation, key as ``Authorization: Bearer KEY`` (``moderation_api``);
- ``GET /healthz`` - liveness and readiness (503 while shutting down);
- ``GET /metrics`` - Prometheus.

Every answer carries ``X-Polytox-Scorer: <scorer id>`` (name@version), so every stored score can be
traced to the model and options that produced it. Bodies are read up to ``max_body_bytes`` and refused
beyond it with 413 (``bodies``); keys are checked before anything is parsed and never logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .._util import jsondepth
from ..scoring.base import Scorer
from ..scoring.storing import no_store
from . import INSTALL_HINT
from .batch_http import SubRequest, build_batch_response, parse_batch
from .batcher import MicroBatcher, Overloaded, Shed
from .bodies import BodyTooLarge, check_content_type, no_duplicate_keys, read_limited
from .discovery import API_VERSION, discovery_document
from .errors import ApiError, invalid, overloaded, quota_exceeded, shed
from .metrics import Metrics
from .moderation_api import build_moderation, parse_moderation
from .perspective_api import build_response, parse_analyze, texts_to_score
from .quotas import KeyStore, Quotas

try:
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(f"polytox serve needs starlette and uvicorn: {INSTALL_HINT}") from exc

log = logging.getLogger("polytox.serve")
ANALYZE_PATH = f"/{API_VERSION}/comments:analyze"
SCORER_HEADER = "X-Polytox-Scorer"


@dataclass(frozen=True)
class ServeConfig:
    """Tuning of one server (CLI flags of ``polytox serve``)."""

    max_batch: int = 64  # texts per scorer call
    max_wait_ms: float = 2.0  # how long the first text of a batch waits for company
    max_queue: int = 1024  # texts waiting for the scorer before requests get 429
    max_queue_wait_s: float = 2.0  # estimated wait past which requests get 429 (0: no bound in time)
    qps: float = 0.0  # per-key quota, comments per second (0: none)
    burst: float = 0.0  # bucket size (0: max(1, qps))
    max_body_bytes: int = 1 << 20  # whole request body (a batch holds up to 100 comments)
    span_annotations: bool = True  # score sentences for spanAnnotations (False: refuse it)
    flag_threshold: float = 0.5  # /v1/moderations "flagged"
    access_log: bool = False  # one line per request: method, path without query, status, ms


class Server:
    """State shared by the routes: scorer, batcher, keys, quotas, metrics."""

    def __init__(
        self, scorer: Scorer, keys: KeyStore, config: ServeConfig, detect: Callable[[str], str] | None = None
    ) -> None:
        self.scorer = scorer
        self.keys = keys
        self.config = config
        self.metrics = Metrics()
        self.quotas = Quotas(config.qps, config.burst)
        self.requests_in_flight = 0  # analyze/moderation requests being handled (the batcher's hint)
        self.batcher = MicroBatcher(
            scorer,
            max_batch=config.max_batch,
            max_wait_s=config.max_wait_ms / 1000,
            max_queue=config.max_queue,
            max_queue_wait_s=config.max_queue_wait_s,
            metrics=self.metrics,
            in_flight=lambda: self.requests_in_flight,
        )
        if detect is None:
            from ..langs.detect import detect_language

            detect = detect_language
        self.detect = detect
        self.closing = False

    def warm_up(self) -> None:
        """Load the language identifier and the scorer's model before the first request (not after it)."""
        self.detect("warm up")
        langs = sorted(self.scorer.languages) if self.scorer.languages is not None else ["en"]
        lang = "en" if "en" in langs else langs[0]
        with no_store():  # the warm-up text is nobody's: it stays out of the score cache
            self.scorer.score(["polytox serve warm-up"], [lang])

    # ---- plumbing ----------------------------------------------------------------------------------
    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {SCORER_HEADER: self.scorer.id, **(extra or {})}

    def json(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> Response:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return Response(
            body, status_code=status, headers=self.headers(extra), media_type="application/json; charset=UTF-8"
        )

    def observe(self, endpoint: str, status: int, started: float, error: ApiError | None = None) -> None:
        self.metrics.requests.labels(endpoint, str(status)).inc()
        self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
        if error is not None:
            self.metrics.errors.labels(error.label).inc()

    async def read_body(self, request: Request) -> bytes:
        """The body, refused with 413 past ``max_body_bytes`` (``bodies.read_limited``)."""
        try:
            return await read_limited(
                request.stream(), request.headers.get("content-length"), self.config.max_body_bytes
            )
        except BodyTooLarge as exc:
            if not exc.drained:  # the rest was not read: the connection cannot carry another request
                exc.headers["Connection"] = "close"
            raise
        except ClientDisconnect:  # the client went away mid-body: one log line, not an ASGI traceback
            log.info("%s %s: the client disconnected before sending the whole body", request.method, request.url.path)
            raise invalid("The client disconnected before sending the whole request body.") from None

    @staticmethod
    def decode_json(raw: bytes, content_type: str | None) -> Any:
        """The JSON body of a request: ``Content-Type`` must name JSON (UTF-8, the only charset JSON has),
        duplicate keys are refused, as Perspective's protobuf parser refuses them."""
        check_content_type(content_type)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid(f"Invalid JSON payload received. Invalid UTF-8 at byte {exc.start}.") from None
        try:
            return jsondepth.loads(text, object_pairs_hook=no_duplicate_keys)
        except ValueError as exc:
            raise invalid(f"Invalid JSON payload received. {exc}.") from None

    def check_key(self, key: str | None) -> None:
        if self.keys.check(key):
            return
        if not key:
            raise ApiError(403, "The request is missing a valid API key.")
        raise ApiError(400, "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")

    async def score(self, texts: list[str], langs: list[str], store: bool = True) -> list[Any]:
        if len(texts) > self.config.max_queue:  # it could never fit: a 400 that says why, not a retryable 503
            raise invalid(
                f"This request needs {len(texts)} scorer inputs (the text, plus one per sentence with "
                f"spanAnnotations), more than the server's scoring queue holds (--max-queue "
                f"{self.config.max_queue}); send fewer texts or sentences per request, or spanAnnotations: false."
            )
        try:
            return await self.batcher.score(texts, langs, store)
        except Shed as exc:
            raise shed(str(exc), exc.retry_after_s) from None
        except Overloaded as exc:
            raise overloaded(str(exc)) from None

    async def counted(self, handler: Callable[[Request], Any], request: Request) -> Response:
        """Run a scoring route while counting it in flight (the batcher's hint)."""
        self.requests_in_flight += 1
        try:
            return await handler(request)  # type: ignore[no-any-return]
        finally:
            self.requests_in_flight -= 1

    # ---- Perspective ---------------------------------------------------------------------------------
    async def analyze(self, key: str | None, raw: bytes, content_type: str | None) -> tuple[int, Any, dict[str, str]]:
        """One analyze call (direct or from a batch): (status, JSON body, extra headers)."""
        try:
            self.check_key(key)
            wait = self.quotas.take(key)
            if wait > 0:
                raise quota_exceeded(wait)
            body = self.decode_json(raw, content_type)
            req = parse_analyze(body, self.scorer, self.detect, self.config.span_annotations)
            texts = texts_to_score(req)
            # doNotStore: the texts' scores are not written to the score cache (nor any archive)
            scores = await self.score(texts, [req.lang] * len(texts), store=body.get("doNotStore") is not True)
            return 200, build_response(req, scores, self.scorer), {}
        except ApiError as err:
            self.metrics.errors.labels(err.label).inc()
            return err.code, err.google_body(), err.headers

    async def route_analyze(self, request: Request) -> Response:
        started = time.perf_counter()
        key = request.query_params.get("key")
        try:
            raw = await self.read_body(request)
        except ApiError as err:
            self.observe("analyze", err.code, started, err)
            return self.json(err.code, err.google_body(), err.headers)
        status, payload, extra = await self.analyze(key, raw, request.headers.get("content-type"))
        self.observe("analyze", status, started)
        return self.json(status, payload, extra)

    async def route_batch(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            raw = await self.read_body(request)
            subs = parse_batch(request.headers.get("content-type", ""), raw)
        except ApiError as err:
            self.observe("batch", err.code, started, err)
            return self.json(err.code, err.google_body(), err.headers)
        answers = await asyncio.gather(*(self._sub(sub) for sub in subs))
        body, media = build_batch_response(
            [(sub, status, payload) for sub, (status, payload) in zip(subs, answers, strict=True)]
        )
        self.observe("batch", 200, started)
        return Response(body, status_code=200, headers=self.headers(), media_type=media)

    async def _sub(self, sub: SubRequest) -> tuple[int, bytes]:
        parts = urlsplit(sub.target)
        if sub.method != "POST" or not parts.path.endswith(ANALYZE_PATH):
            err = ApiError(404, f"Batch part {sub.method} {parts.path}: only POST {ANALYZE_PATH} is served.")
            return err.code, json.dumps(err.google_body()).encode()
        keys = parse_qs(parts.query).get("key")
        key = keys[0] if keys else None
        status, payload, _ = await self.analyze(key, sub.body, sub.headers.get("content-type"))
        self.metrics.requests.labels("analyze", str(status)).inc()
        return status, json.dumps(payload, ensure_ascii=False).encode("utf-8")

    async def route_discovery(self, request: Request) -> Response:
        version = request.query_params.get("version", API_VERSION)
        if version != API_VERSION:
            err = ApiError(404, f"No discovery document for version {version!r}; this server serves {API_VERSION}.")
            return self.json(404, err.google_body())
        root = str(request.base_url)
        return self.json(200, discovery_document(root))

    # ---- OpenAI moderation ---------------------------------------------------------------------------
    async def route_moderations(self, request: Request) -> Response:
        started = time.perf_counter()
        auth = request.headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        try:
            if not self.keys.check(key):
                raise ApiError(401, "Incorrect API key provided.", "INVALID_API_KEY")
            raw = await self.read_body(request)
            req = parse_moderation(self.decode_json(raw, request.headers.get("content-type")), self.scorer, self.detect)
            wait = self.quotas.take(key, len(req.texts))
            if wait > 0:
                quota = quota_exceeded(wait)
                raise ApiError(429, f"Rate limit reached for requests: {quota.message}", quota.reason, quota.headers)
            scores = await self.score(req.texts, req.langs)
            payload = build_moderation(req, scores, self.scorer, self.config.flag_threshold)
        except ApiError as err:
            self.observe("moderations", err.code, started, err)
            return self.json(err.code, err.openai_body(), err.headers)
        self.observe("moderations", 200, started)
        return self.json(200, payload)

    # ---- operations ----------------------------------------------------------------------------------
    async def route_healthz(self, request: Request) -> Response:
        status = 503 if self.closing else 200
        return self.json(
            status,
            {
                "status": "shutting down" if self.closing else "ok",
                "scorer": self.scorer.id,
                "queue": self.batcher.pending,
                "batches": self.batcher.batches,
                "texts": self.batcher.scored,
            },
        )

    async def route_metrics(self, request: Request) -> Response:
        body, media = self.metrics.render()
        return Response(body, headers=self.headers(), media_type=media)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        err = ApiError(404, f"No such method: {request.method} {request.url.path}")
        return self.json(404, err.google_body())

    async def method_not_allowed(self, request: Request, exc: Exception) -> Response:
        err = ApiError(405, f"Method {request.method} is not allowed on {request.url.path}")
        return self.json(405, err.google_body())


class RequestTracker:
    """Pure ASGI middleware: the in-flight gauge and, when enabled, an access log without query strings."""

    def __init__(self, app: Any, server: Server) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [0]

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        self.server.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.server.metrics.in_flight.dec()
            if self.server.config.access_log:  # the path only: the query string may hold a key
                log.info(
                    "%s %s %d %.1f ms",
                    scope["method"],
                    scope["path"],
                    status[0],
                    (time.perf_counter() - started) * 1000,
                )


def create_app(
    scorer: Scorer, keys: KeyStore, config: ServeConfig | None = None, detect: Callable[[str], str] | None = None
) -> Starlette:
    """The app; ``app.state.server`` holds the ``Server`` (metrics, batcher) for tests and benchmarks."""
    server = Server(scorer, keys, config or ServeConfig(), detect)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.get_running_loop().run_in_executor(None, server.warm_up)
        server.batcher.start()
        log.info("serving scorer %s (%s keys%s)", scorer.id, len(keys), ", open" if keys.open else "")
        try:
            yield
        finally:
            server.closing = True
            await server.batcher.close()
            log.info("scorer queue drained; %d texts in %d batches", server.batcher.scored, server.batcher.batches)

    routes = [
        Route(ANALYZE_PATH, partial(server.counted, server.route_analyze), methods=["POST"]),
        Route("/batch", partial(server.counted, server.route_batch), methods=["POST"]),
        Route(f"/batch/commentanalyzer/{API_VERSION}", partial(server.counted, server.route_batch), methods=["POST"]),
        Route("/$discovery/rest", server.route_discovery, methods=["GET"]),
        Route(f"/discovery/v1/apis/commentanalyzer/{API_VERSION}/rest", server.route_discovery, methods=["GET"]),
        Route("/v1/moderations", partial(server.counted, server.route_moderations), methods=["POST"]),
        Route("/healthz", server.route_healthz, methods=["GET"]),
        Route("/metrics", server.route_metrics, methods=["GET"]),
    ]
    from starlette.middleware import Middleware

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(RequestTracker, server=server)],
        exception_handlers={404: server.not_found, 405: server.method_not_allowed},
    )
    app.state.server = server
    return app
