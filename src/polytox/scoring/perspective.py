"""Perspective API (Google Jigsaw), used the way the papers meant it and the peers did not.

Contract (DATA.md): ``POST {url}/v1alpha1/comments:analyze?key=KEY`` with ``comment.text`` (at most 20,480
UTF-8 bytes), ``requestedAttributes``, ``languages`` and ``doNotStore``; read
``attributeScores.<ATTR>.summaryScore.value`` (PTP Appendix A: the whole-text score, not the first
sentence's ``spanScores``).

What this scorer guarantees:

- the key comes only from ``PERSPECTIVE_API_KEY``; passing it as an option is refused, and it never
  appears in ``describe()`` (the manifest), an error message, the cache or the response archive;
- each text is cut to 20,480 bytes on a character boundary, sent with its language as ``languages`` and
  ``doNotStore: true``;
- requests are paced to the quota by a token bucket shared by ``concurrency`` worker threads (every try
  takes a token), so the quota is used fully without bursts over it;
- 429, 5xx, timeouts and dropped connections are retried with jittered exponential backoff (tenacity);
  once the tries are spent the text gets a *transient* error, which is not cached, so a rerun retries it;
- a 400 is never retried: it becomes a permanent error carrying the API's reason (``COMMENT_EMPTY``,
  ``LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE``, ...); with ``retry_without_language=true`` a language error is
  retried once without the hint (Perspective then detects the language itself);
- 401/403 (bad key, API not enabled) and 404 (wrong ``url``) stop all further requests of the run: every
  remaining text gets a transient error instead of hammering the API;
- every 200 and 400 response body is appended to a permanent archive (``archive.py``) beside the score
  cache, which keeps the values; the key is redacted (``***``) from every body archived and every error
  kept, raw and percent-encoded, since a server (or a proxy) may echo the request URL; a text scored
  under ``storing.no_store()`` (``polytox serve``'s ``doNotStore``) is not archived.

Options (``--scorer-opt KEY=VALUE``): ``url``, ``qps`` (default 1), ``attributes`` (comma list, or ``ptp``
for PTP's six, ``rtp`` for RTP's eight; TOXICITY is always included), ``concurrency`` (default: enough
threads for the rate), ``timeout`` (s), ``max_attempts``, ``backoff`` / ``backoff_max`` (s),
``retry_without_language``, ``language_hint`` (send ``languages``; default true), ``languages``
(``documented``: refuse languages Perspective does not list, before any request; ``any``: let the API
decide), ``archive`` (a path, or ``off``).
"""

from __future__ import annotations

import contextvars
import http.client
import json
import math
import os
import ssl
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, quote_plus, urlsplit

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from .. import constants as C
from .._util import ranges as R
from .._util import textutil
from .._util.options import Option, as_bool
from ..errors import PolytoxError
from ..types import Score, text_hash
from .archive import ResponseArchive
from .base import Scorer, config_digest
from .pacing import AdaptiveTokenBucket
from .storing import storing

KEY_ENV = "PERSPECTIVE_API_KEY"
DEFAULT_URL = "https://commentanalyzer.googleapis.com"
API_PATH = "/v1alpha1/comments:analyze"
ATTRIBUTE_PRESETS = {"ptp": C.PTP_PERSPECTIVE_ATTRIBUTES, "rtp": C.RTP_PERSPECTIVE_ATTRIBUTES}
ERROR_PREFIX = "PERSPECTIVE"
REDACTED = "***"  # what the key becomes in everything written: archive, cache, errors, run files


class TransientAPIError(Exception):
    """Worth retrying: 429, 5xx, timeout, connection error. ``retry_after`` is the server's hint (s)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentAPIError(Exception):
    """A 400: the request itself is refused. ``reason`` is the API's error type."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class FatalAPIError(Exception):
    """The configuration is wrong (key, endpoint): no further request of this run can succeed."""


def truncate_utf8(text: str, max_bytes: int = C.PERSPECTIVE_MAX_BYTES) -> tuple[str, bool]:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes without splitting a character; (text, was_cut).

    The same cut as ``polytox build`` applies to documents (``textutil.truncate_utf8``)."""
    cut = textutil.truncate_utf8(text, max_bytes)
    return cut, cut is not text


def parse_attributes(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"ptp"``, ``"rtp"`` or a comma list -> upper-case attribute names, TOXICITY first and always there."""
    if isinstance(value, str):
        preset = ATTRIBUTE_PRESETS.get(value.strip().lower())
        names = list(preset) if preset else [a.strip().upper() for a in value.split(",") if a.strip()]
    else:
        names = [str(a).strip().upper() for a in value]
    out = ["TOXICITY"] + [a for a in names if a != "TOXICITY"]
    return tuple(dict.fromkeys(out))


def build_request(text: str, lang: str | None, attributes: Sequence[str]) -> dict[str, Any]:
    """The request body of the contract: plain text, requested attributes, language hint, doNotStore."""
    body: dict[str, Any] = {
        "comment": {"text": text, "type": "PLAIN_TEXT"},
        "requestedAttributes": {a: {} for a in attributes},
        "doNotStore": True,
    }
    if lang:
        body["languages"] = [lang]
    return body


def read_summary_scores(response: Mapping[str, Any], attributes: Sequence[str]) -> dict[str, float]:
    """``attributeScores.<ATTR>.summaryScore.value`` for each attribute (lower-case keys).

    Raises ``ValueError`` when TOXICITY is missing or a value is not a number in [0, 1]; another
    attribute the API left out is simply absent (its column is null), never 0.
    """
    scores = response.get("attributeScores")
    if not isinstance(scores, Mapping):
        raise ValueError("response has no attributeScores")
    out: dict[str, float] = {}
    for attr in attributes:
        node = scores.get(attr)
        value = node.get("summaryScore", {}).get("value") if isinstance(node, Mapping) else None
        if value is None:
            if attr == "TOXICITY":
                raise ValueError("response has no TOXICITY summaryScore")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{attr} summaryScore.value is not a number in [0, 1]: {value!r}")
        out[attr.lower()] = float(value)
    return out


def parse_error(body: bytes) -> tuple[str, str]:
    """(reason, message) of a Google API error body; the reason is ``errorType`` when present."""
    try:
        data = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return "UNKNOWN", body[:200].decode("utf-8", errors="replace")
    error = data.get("error", {}) if isinstance(data, Mapping) else {}
    if not isinstance(error, Mapping):
        return "UNKNOWN", str(error)[:200]
    message = str(error.get("message", ""))
    reason = ""
    for detail in error.get("details", []) or []:
        if isinstance(detail, Mapping):
            reason = str(detail.get("errorType") or detail.get("reason") or "")
            if reason:
                break
    return reason or str(error.get("status") or "UNKNOWN"), message


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class PerspectiveScorer(Scorer):
    OPTIONS: ClassVar[dict[str, Option]] = {
        "url": Option("str", default=DEFAULT_URL, help="API root (a stand-in server for tests)"),
        "qps": Option(
            "float",
            range=R.NON_NEGATIVE,
            default=C.PERSPECTIVE_DEFAULT_QPS,
            help="requests per second (the project quota)",
        ),
        "attributes": Option(
            "str", default="TOXICITY", help="comma-separated attributes; ptp / rtp for the papers' sets"
        ),
        "concurrency": Option("int", range=R.COUNT, default=0, help="worker threads (0: from qps)"),
        "timeout": Option("float", range=R.POSITIVE, default=30.0, help="seconds one request may take"),
        "max_attempts": Option("int", range=R.AT_LEAST_ONE, default=8, help="tries of one request"),
        "backoff": Option("float", range=R.NON_NEGATIVE, default=1.0, help="first retry's backoff in seconds"),
        "backoff_max": Option("float", range=R.NON_NEGATIVE, default=60.0, help="longest backoff in seconds"),
        "retry_without_language": Option(
            "bool", default=False, help="retry a refused language without a language hint"
        ),
        "language_hint": Option("bool", default=True, help="send each text's language"),
        "languages": Option("str", default="auto", help="languages it accepts (auto: the API's list)"),
        "archive": Option("str", default="default", help="archive of raw responses (default, off or a path)"),
        "key": Option("str", help="refused: put the key in PERSPECTIVE_API_KEY"),
        "api_key": Option("str", help="refused: put the key in PERSPECTIVE_API_KEY"),
    }
    name = "perspective"
    thread_safe = True
    # Never cut: one call's texts share the worker pool, so no batch boundary waits on a slow request.
    batch_size = 1_000_000

    def __init__(
        self,
        url: str = OPTIONS["url"].default,
        qps: str | float = OPTIONS["qps"].default,
        attributes: str = OPTIONS["attributes"].default,
        concurrency: str | int = OPTIONS["concurrency"].default,
        timeout: str | float = OPTIONS["timeout"].default,
        max_attempts: str | int = OPTIONS["max_attempts"].default,
        backoff: str | float = OPTIONS["backoff"].default,
        backoff_max: str | float = OPTIONS["backoff_max"].default,
        retry_without_language: str | bool = OPTIONS["retry_without_language"].default,
        language_hint: str | bool = OPTIONS["language_hint"].default,
        languages: str = OPTIONS["languages"].default,
        archive: str = OPTIONS["archive"].default,
        key: str | None = None,
        api_key: str | None = None,
    ) -> None:
        if key is not None or api_key is not None:
            # Never echo the value: it may be a real key typed on a command line.
            raise PolytoxError(
                f"the Perspective key is never an option (it would land in shell history, "
                f"configs and manifests); set the environment variable {KEY_ENV} instead"
            )
        secret = os.environ.get(KEY_ENV, "").strip()
        if not secret:
            raise PolytoxError(
                f"{KEY_ENV} is not set: the Perspective scorer reads its API key only from that environment variable"
            )
        self._key = secret
        self.qps = float(qps)
        if not self.qps > 0 or math.isinf(self.qps):
            raise PolytoxError(f"perspective: qps must be a positive number, got {qps!r}")
        self.request_attributes = parse_attributes(attributes)
        self.attributes = tuple(a.lower() for a in self.request_attributes)
        self.retry_without_language = as_bool(retry_without_language, "retry_without_language")
        self.language_hint = as_bool(language_hint, "language_hint")
        self.timeout = float(timeout)
        self.max_attempts = max(1, int(max_attempts))
        self.backoff = float(backoff)
        self.backoff_max = float(backoff_max)
        self.concurrency = int(concurrency) or min(64, max(4, math.ceil(2 * self.qps)))

        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PolytoxError(f"perspective: url must be http(s)://host[:port][/path], got {url!r}")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        path = parts.path if parts.path.endswith(":analyze") else parts.path + API_PATH
        self.endpoint = f"{parts.scheme}://{parts.netloc}{path}"  # no key: safe to show and store
        self._request_path = f"{path}?key={self._key}"

        if languages == "any" or (languages == "auto" and self.retry_without_language):
            self.languages = None
        elif languages in ("auto", "documented"):
            english_only = bool(set(self.request_attributes) & C.PERSPECTIVE_ENGLISH_ONLY)
            self.languages = frozenset({"en"}) if english_only else C.PERSPECTIVE_LANGUAGES
        else:
            self.languages = frozenset(x.strip() for x in languages.split(",") if x.strip())

        # The cache identity: what changes the answers (endpoint, attributes, language handling), not pacing.
        self.version = "v1alpha1-" + config_digest(
            {
                "endpoint": self.endpoint,
                "attrs": self.request_attributes,
                "hint": self.language_hint,
                "retry_no_lang": self.retry_without_language,
            }
        )
        self._exp_wait = wait_random_exponential(multiplier=self.backoff, max=self.backoff_max)
        self.bucket = AdaptiveTokenBucket(self.qps * C.PERSPECTIVE_PACING_SHARE)
        self._archive = self._open_archive(archive)
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._stats_lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self._fatal: str | None = None

    # ---- plumbing ------------------------------------------------------------------------------------
    @staticmethod
    def _open_archive(archive: str) -> ResponseArchive | None:
        if archive == "off":
            return None
        if archive == "default":
            from .._util.paths import default_cache_dir

            return ResponseArchive(default_cache_dir() / "perspective_responses.sqlite")
        return ResponseArchive(Path(archive))

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "endpoint": self.endpoint,
            "qps": self.qps,
            "concurrency": self.concurrency,
            "request_attributes": list(self.request_attributes),
            "language_hint": self.language_hint,
            "retry_without_language": self.retry_without_language,
            "archive": str(self._archive.path) if self._archive else None,
        }

    def _count(self, key: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[key] += n

    def _safe(self, message: str) -> str:
        """``message`` with the key redacted, as sent and as a server may echo it (percent-encoded)."""
        for form in {self._key, quote(self._key, safe=""), quote_plus(self._key)}:
            message = message.replace(form, REDACTED)
        return message

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout, context=ssl.create_default_context()
                )
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _post(self, payload: bytes) -> tuple[int, bytes, dict[str, str]]:
        """One HTTP POST on this thread's kept-alive connection."""
        conn = self._connection()
        try:
            conn.request(
                "POST", self._request_path, body=payload, headers={"Content-Type": "application/json; charset=utf-8"}
            )
            resp = conn.getresponse()
            body = resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            self._drop_connection()
            kind = "TIMEOUT" if isinstance(exc, TimeoutError) else "CONNECTION"
            self._count(kind.lower())
            raise TransientAPIError(self._safe(f"{kind}: {type(exc).__name__}: {exc}")) from None
        if headers.get("connection", "").lower() == "close":
            self._drop_connection()
        return resp.status, body, headers

    # ---- one request -----------------------------------------------------------------------------------
    def _attempt(self, payload: bytes, digest: str, lang_sent: str | None) -> dict[str, Any]:
        """Send once (after taking a token); classify the answer."""
        if self._fatal:
            raise FatalAPIError(self._fatal)
        self.bucket.acquire()
        status, body, headers = self._post(payload)
        self._count("requests")
        self._count(f"http_{status}")
        if status == 200:
            self.bucket.on_success()
            self._archive_add(digest, lang_sent, status, body)
            try:
                data = json.loads(body.decode("utf-8"))
            except ValueError:
                raise TransientAPIError("BAD_RESPONSE: 200 with a body that is not JSON") from None
            if not isinstance(data, dict):
                raise TransientAPIError("BAD_RESPONSE: 200 with a JSON body that is not an object")
            return data
        if status == 429:
            self.bucket.on_throttled()
            raise TransientAPIError("HTTP 429 RATE_LIMIT_EXCEEDED", _retry_after(headers))
        if status >= 500:
            raise TransientAPIError(f"HTTP {status} {parse_error(body)[0]}", _retry_after(headers))
        reason, message = parse_error(body)
        if status == 400 and "API key" not in message and reason != "API_KEY_INVALID":
            self._archive_add(digest, lang_sent, status, body)
            raise PermanentAPIError(reason, self._safe(message))
        self._fatal = self._safe(
            f"{ERROR_PREFIX}_FATAL: HTTP {status} {reason} from {self.endpoint}: "
            f"{message} (check {KEY_ENV} and the url option); no further requests "
            "were sent"
        )
        raise FatalAPIError(self._fatal)

    def _archive_add(self, digest: str, lang_sent: str | None, status: int, body: bytes) -> None:
        """Archive a response body, the key redacted (a server may echo the request URL); nothing for a
        text scored under ``storing.no_store()`` (serve's doNotStore)."""
        if self._archive is not None and storing():
            self._archive.add(
                self.endpoint,
                digest,
                lang_sent,
                ",".join(self.request_attributes),
                status,
                self._safe(body.decode("utf-8", errors="replace")),
            )

    def _wait(self, retry_state: Any) -> float:
        """Full-jitter exponential backoff, but never shorter than the server's Retry-After."""
        wait = self._exp_wait(retry_state)
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hint = getattr(exc, "retry_after", None)
        return max(wait, float(hint)) if hint else wait

    def _call(self, text: str, digest: str, lang: str | None) -> dict[str, Any]:
        """Send with retries on transient failures (tenacity); 400 and fatal errors pass straight through."""
        payload = json.dumps(build_request(text, lang, self.request_attributes), ensure_ascii=False).encode()
        retrying = Retrying(
            retry=retry_if_exception_type(TransientAPIError),
            wait=self._wait,
            stop=stop_after_attempt(self.max_attempts),
            reraise=True,
            before_sleep=lambda _state: self._count("retries"),
        )
        return retrying(self._attempt, payload, digest, lang)

    # ---- one text --------------------------------------------------------------------------------------
    def score_one(self, text: str, lang: str) -> Score:
        """The score of one text, or its error (permanent for 400s, transient for everything retryable),
        the key redacted from it (an error may quote a response that echoes the request URL)."""
        score = self._score_one(text, lang)
        if score.error is None:
            return score
        return Score.failed(self._safe(score.error), transient=score.transient)

    def _score_one(self, text: str, lang: str) -> Score:
        try:
            cut, truncated = truncate_utf8(text)
        except UnicodeEncodeError as exc:
            return Score.failed(f"INVALID_TEXT: not valid Unicode (lone surrogate at {exc.start})")
        if truncated:
            self._count("truncated")
        digest = text_hash(text)
        hint = lang if self.language_hint and lang else None
        try:
            try:
                data = self._call(cut, digest, hint)
            except PermanentAPIError as exc:
                if not (self.retry_without_language and hint and "LANGUAGE" in exc.reason):
                    raise
                self._count("retried_without_language")
                data = self._call(cut, digest, None)
            values = read_summary_scores(data, self.request_attributes)
        except PermanentAPIError as exc:
            self._count("permanent_errors")
            return Score.failed(f"{ERROR_PREFIX}_400 {exc.reason}: {exc.message}")
        except TransientAPIError as exc:
            self._count("gave_up")
            return Score.failed(
                f"{ERROR_PREFIX}_TRANSIENT: gave up after {self.max_attempts} tries: {exc}", transient=True
            )
        except FatalAPIError as exc:
            return Score.failed(str(exc), transient=True)
        except ValueError as exc:
            return Score.failed(f"{ERROR_PREFIX}_BAD_RESPONSE: {exc}", transient=True)
        self._count("scored")
        return Score(values=values)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        with self._stats_lock:  # several callers may share this scorer (thread_safe): one pool for all
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="perspective")
            pool = self._pool
        # Each text runs in a copy of the caller's context, so ``storing.no_store()`` reaches the workers.
        futures = [
            pool.submit(contextvars.copy_context().run, self.score_one, t, lang)
            for t, lang in zip(texts, langs, strict=True)
        ]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._archive is not None:
            self._archive.close()
            self._archive = None
