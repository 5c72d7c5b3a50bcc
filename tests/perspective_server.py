"""A real HTTP server on 127.0.0.1 speaking the Perspective API contract (DATA.md), for tests and benchmarks.

It checks what the real service checks (key, body, 20,480-byte limit, empty text, languages per
attribute), answers with ``attributeScores.<ATTR>.summaryScore`` and per-sentence ``spanScores`` (the first
span deliberately differs from the summary, so a client reading ``spanScores[0]`` is caught), enforces a
per-second quota with 429 ``RATE_LIMIT_EXCEEDED`` (a sliding one-second window over accepted requests),
and injects 5xx errors and slow responses, at random (seeded) or for chosen texts.

Every request is logged (time, status, text, languages, doNotStore) so tests can assert on what the client
actually sent.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PATH = "/v1alpha1/comments:analyze"
MAX_BYTES = 20_480
TOXICITY_LANGS = frozenset({"ar", "zh", "cs", "nl", "en", "fr", "de", "hi", "hi-Latn", "id", "it", "ja", "ko",
                            "pl", "pt", "ru", "es", "sv"})
ENGLISH_ONLY = frozenset({"SEXUALLY_EXPLICIT", "FLIRTATION"})
KNOWN_ATTRIBUTES = frozenset({"TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "PROFANITY",
                              "THREAT", "SEXUALLY_EXPLICIT", "FLIRTATION"})
RUDE = re.compile(r"\b(idiot|stupid|moron|dumb|crap|hate|damn|loser|jerk)\b", re.IGNORECASE)


def model_score(text: str, attribute: str = "TOXICITY") -> float:
    """The server's deterministic 'model': rude words push the score up; a hash adds a small offset."""
    digest = hashlib.blake2b(f"{attribute}\x1f{text}".encode(), digest_size=8).digest()
    jitter = int.from_bytes(digest, "big") / 2**64 * 0.1
    return round(min(1.0, 0.02 + jitter + 0.35 * len(RUDE.findall(text))), 6)


def _is_empty(text: str) -> bool:
    """Nothing but whitespace and invisible format characters (zero-width spaces, BOM)."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


def detect(text: str) -> str | None:
    """A crude language detector for requests without ``languages``: ASCII -> en, CJK -> zh, else none."""
    if text.isascii():
        return "en"
    if re.search(r"[\u4e00-\u9fff]", text):
        return "zh"
    return None


@dataclass
class RequestRecord:
    t: float
    status: int
    text: str | None = None
    languages: list[str] | None = None
    do_not_store: Any = None
    attributes: list[str] = field(default_factory=list)
    nbytes: int = 0
    key: str | None = None


@dataclass
class ServerConfig:
    key: str = "test-key"
    qps: float = 0.0  # 0: no quota
    latency_s: float = 0.0  # added to every accepted request
    error_rate: float = 0.0  # share of accepted requests answered 503 (seeded)
    slow_rate: float = 0.0  # share of accepted requests delayed by slow_s (seeded)
    slow_s: float = 0.0
    seed: int = 0
    # Scripted answers for chosen texts: each request for the text pops the next status (then 200).
    script: dict[str, list[int]] = field(default_factory=dict)
    # Chosen texts whose first request is delayed this many seconds.
    slow_texts: dict[str, float] = field(default_factory=dict)
    retry_after: float | None = None  # sent with 429s when set


def _error(code: int, status: str, message: str, error_type: str | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if error_type:
        err["details"] = [{"@type": "type.googleapis.com/google.commentanalyzer.v1alpha1.Error",
                           "errorType": error_type}]
    return {"error": err}


class FakePerspective:
    """``with FakePerspective(qps=20) as server: ... server.url ...``; ``server.log`` lists every request."""

    def __init__(self, **config: Any) -> None:
        self.config = ServerConfig(**config)
        self.log: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._window: deque[float] = deque()
        self._rng = random.Random(self.config.seed)
        self._script = {k: list(v) for k, v in self.config.script.items()}
        self._slow_done: set[str] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    # ---- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> FakePerspective:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status, payload, headers = server.handle(self.path, raw)
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        host, port = self._httpd.server_address[:2]
        self._url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakePerspective:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL (kept after ``stop`` so tests can still compare against it)."""
        assert self._url is not None, "server not started"
        return self._url

    # ---- counts for tests and benchmarks ---------------------------------------------------------------
    def count(self, status: int | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.log if status is None or r.status == status)

    def max_in_window(self, window: float = 1.0) -> int:
        """Most accepted (non-429) requests seen in any ``window`` seconds: must never exceed the quota."""
        with self._lock:
            times = sorted(r.t for r in self.log if r.status != 429)
        best, lo = 0, 0
        for hi, t in enumerate(times):
            while t - times[lo] >= window:
                lo += 1
            best = max(best, hi - lo + 1)
        return best

    # ---- the contract --------------------------------------------------------------------------------
    def _record(self, rec: RequestRecord) -> None:
        with self._lock:
            self.log.append(rec)

    def _admit(self, now: float) -> bool:
        """Sliding one-second window: at most ``qps`` accepted requests in any second."""
        if self.config.qps <= 0:
            return True
        with self._lock:
            while self._window and now - self._window[0] >= 1.0:
                self._window.popleft()
            if len(self._window) >= self.config.qps:
                return False
            self._window.append(now)
            return True

    def handle(self, raw_path: str, raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        now = time.monotonic()
        parts = urlsplit(raw_path)
        key = (parse_qs(parts.query).get("key") or [None])[0]
        rec = RequestRecord(t=now, status=0, nbytes=0, key=key)
        self._record(rec)  # logged on arrival (status 0 until answered), so slow requests are seen at once
        status, payload, headers = self._handle(parts.path, key, raw, rec, now)
        rec.status = status
        return status, payload, headers

    def _handle(self, path: str, key: str | None, raw: bytes, rec: RequestRecord,
                now: float) -> tuple[int, dict[str, Any], dict[str, str]]:
        cfg = self.config
        if path != PATH:
            return 404, _error(404, "NOT_FOUND", f"no such method {path}"), {}
        if key != cfg.key:
            return 403, _error(403, "PERMISSION_DENIED", "The request is missing a valid API key."), {}
        if not self._admit(now):
            headers = {"Retry-After": str(cfg.retry_after)} if cfg.retry_after is not None else {}
            return 429, _error(429, "RESOURCE_EXHAUSTED",
                               "Quota exceeded for quota metric 'Analyze requests' and limit "
                               "'Analyze requests per minute' (AnalyzeRequestsPerMinutePerProject).",
                               "RATE_LIMIT_EXCEEDED"), headers
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return 400, _error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."), {}
        comment = body.get("comment") or {}
        text = comment.get("text")
        rec.text = text
        rec.languages = body.get("languages")
        rec.do_not_store = body.get("doNotStore")
        rec.attributes = sorted(body.get("requestedAttributes") or {})
        rec.nbytes = len(text.encode("utf-8")) if isinstance(text, str) else 0

        scripted = self._next_scripted(text)
        if scripted is not None and scripted != 200:
            return scripted, _error(scripted, "UNAVAILABLE" if scripted >= 500 else "INVALID_ARGUMENT",
                                    f"scripted {scripted}"), {}
        with self._lock:
            roll_error, roll_slow = self._rng.random(), self._rng.random()
        if roll_error < cfg.error_rate:
            return 503, _error(503, "UNAVAILABLE", "The service is currently unavailable."), {}
        delay = cfg.latency_s + (cfg.slow_s if roll_slow < cfg.slow_rate else 0.0)
        if isinstance(text, str) and text in cfg.slow_texts:
            with self._lock:
                first = text not in self._slow_done
                self._slow_done.add(text)
            if first:
                delay += cfg.slow_texts[text]
        if delay:
            time.sleep(delay)

        if not isinstance(text, str) or _is_empty(text):
            return 400, _error(400, "INVALID_ARGUMENT", "Comment must be non-empty.", "COMMENT_EMPTY"), {}
        if rec.nbytes > MAX_BYTES:
            return 400, _error(400, "INVALID_ARGUMENT", f"Comment text too long: {rec.nbytes} bytes.",
                               "COMMENT_TOO_LONG"), {}
        attributes = body.get("requestedAttributes")
        if not isinstance(attributes, dict) or not attributes:
            return 400, _error(400, "INVALID_ARGUMENT", "requestedAttributes is required."), {}
        unknown = sorted(set(attributes) - KNOWN_ATTRIBUTES)
        if unknown:
            return 400, _error(400, "INVALID_ARGUMENT", f"Unknown attribute: {unknown[0]}",
                               "ATTRIBUTE_NOT_SUPPORTED"), {}
        langs = body.get("languages")
        detected = detect(text)
        effective = list(langs) if langs else ([detected] if detected else [])
        if not effective:
            return 400, _error(400, "INVALID_ARGUMENT", "Unable to detect language.",
                               "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"), {}
        for attr in attributes:
            allowed = {"en"} if attr in ENGLISH_ONLY else TOXICITY_LANGS
            bad = [x for x in effective if x not in allowed]
            if bad:
                return 400, _error(400, "INVALID_ARGUMENT",
                                   f"Attribute {attr} does not support request languages: {','.join(bad)}",
                                   "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"), {}
        return 200, self._scores(text, sorted(attributes), effective, detected), {}

    def _next_scripted(self, text: Any) -> int | None:
        if not isinstance(text, str):
            return None
        with self._lock:
            queue = self._script.get(text)
            return queue.pop(0) if queue else None

    @staticmethod
    def _scores(text: str, attributes: list[str], langs: list[str], detected: str | None) -> dict[str, Any]:
        first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
        out: dict[str, Any] = {}
        for attr in attributes:
            # The first span scores only the first sentence: reading spanScores[0] gives a different value.
            span = {"value": model_score(first + "\x00span", attr), "type": "PROBABILITY"}
            out[attr] = {
                "spanScores": [{"begin": 0, "end": len(first), "score": span}],
                "summaryScore": {"value": model_score(text, attr), "type": "PROBABILITY"},
            }
        return {"attributeScores": out, "languages": langs,
                "detectedLanguages": [detected] if detected else []}
