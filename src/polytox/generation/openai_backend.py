"""OpenAI-compatible HTTP backend (``--backend openai``; ``pip install 'polytox[api]'``).

Talks to any server that speaks OpenAI's ``/v1/completions`` or ``/v1/chat/completions``: ``vllm serve``,
TGI's OpenAI API, OpenAI itself and other compatible services.

- K samples per prompt: one call with ``n=K`` (``n_mode=n``, default) or K calls with ``n=1``
  (``n_mode=repeat``; each call carries its own sample's seed). When a server rejects ``n`` with a 400 that
  names it (llama.cpp: ``Field 'n': Value must be between 1 <= value <= 4``; others: ``n must be <= 1``),
  the backend lowers ``n`` to the maximum the message states (1 when it states none), splits the call into
  calls of at most that many samples (each chunk carries the seed of its first sample; with a maximum of 1
  that is exactly ``repeat`` mode), keeps that maximum for the rest of the run, logs a warning and records
  it under ``n_fallback`` in the manifest's ``model`` entry. No sample is lost.
- ``seed`` is sent (folded to int32) unless ``send_seed=false``; whether it makes sampling reproducible
  depends on the server (vLLM: yes; OpenAI: "best effort").
- At most ``concurrency`` requests in flight; at most ``rate`` requests per second (0 = no limit).
- 429, 408, 5xx, timeouts and connection errors are retried (``max_retries``) with full-jitter exponential
  backoff (tenacity), honouring ``Retry-After``; other 4xx are permanent. A request that still fails is
  recorded as an error on each of its samples, never dropped and never turned into text.
- A server that cannot be reached at all (connection refused or dropped on every attempt of a call's retry
  budget) is gone, not slow: the backend raises ``FatalGenerationError`` (``HTTP_SERVER_GONE``), the run
  stops with what it has stored, and every call still queued fails at once instead of waiting out its
  own retries. A read timeout or a 5xx that outlasts the retries stays a per-sample error.
- The API key is read from the environment variable named by ``api_key_env`` (default
  ``OPENAI_API_KEY``; unset = no ``Authorization`` header) and is never written anywhere: the spec only
  holds the variable's name, and error messages are scrubbed of the key. An ``api_key`` option is refused.
- ``endpoint``: ``completions`` | ``chat`` | ``auto`` (chat when ``--chat-template always``). The empty
  prompt (unprompted generation) is sent to completions as ``empty_prompt`` (default ``""``; for a vLLM
  server use ``<|endoftext|>`` or the model's BOS text); the chat endpoint cannot start from nothing and
  records an error.
- ``n_tokens``: the continuation's tokens, without the end-of-sequence token (as the local backends count).
  ``usage`` cannot give that per choice: with ``n>1`` OpenAI and vLLM report the sum over the choices,
  llama.cpp only choice 0's count (a split of it gave 5 tokens to each of four 20-token answers), and
  llama.cpp counts the end-of-sequence token. Calls therefore ask for per-token log-probabilities
  (``logprobs=1`` on completions, ``logprobs: true`` on chat; the ``token_counts=logprobs`` default) and
  count each choice's entries, less a trailing end-of-sequence entry. A choice that stopped on ``length``
  has exactly ``max_tokens`` tokens, whatever is listed: llama.cpp lists tokens that split a multi-byte
  character (emoji, some CJK) as one entry, so only an answer that stopped early *and* holds such
  characters can be undercounted there. Without log-probabilities (``token_counts=usage``, or a server
  that returns none) the stopped choices share the rest of ``usage``, less their end-of-sequence tokens,
  which is exact with ``n=1`` and when ``usage`` is a sum (OpenAI, vLLM), not with llama.cpp's ``n>1``.

Options: ``OpenAIGenerator.OPTIONS`` (types, ranges, defaults; ``polytox scorers --options generators``
lists them); ``base_url`` is required.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._util import ranges as R
from .._util.options import Option, with_defaults
from .._util.ratelimit import TokenBucket
from ..errors import FatalGenerationError, PolytoxError, require
from ..spec import GenerationSpec
from ..types import Generation, GenerationRequest
from .base import Generator, failed
from .vllm_backend import api_seed

TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
# A 400 about the parameter n: 'n' / "n" / `n` quoted (llama.cpp, OpenAI, TGI), or "n must/should/>/<=...".
N_REJECTED = re.compile(r"""(['"`]n['"`]|\bn\s*(?:must|should|is|>|<|=))""", re.IGNORECASE)
# The maximum such a message states: "<= 4", "1 <= value <= 4", "at most 4", "maximum of 4", "up to 4".
N_MAXIMUM = re.compile(
    r"(?:<=\s*(?:value\s*<=\s*)?|at most\s+|maximum(?:\s+(?:of|is))?\s+|up to\s+)(\d+)", re.IGNORECASE
)

log = logging.getLogger("polytox")


class TransientHTTPError(Exception):
    """A failure worth retrying; ``retry_after`` is the server's hint in seconds, if it gave one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerUnreachableError(TransientHTTPError):
    """No connection to the server (refused, reset, aborted): retried; fatal once the retries are spent."""


class PermanentHTTPError(Exception):
    """A failure that retrying will not fix (400, 401, 404...); ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def allowed_n(message: str, asked: int) -> int | None:
    """The largest ``n`` a server's 400 allows, when the error is about ``n``; None when it is not.

    The maximum is the smallest number the message states after "<=", "at most", "maximum (of)" or
    "up to", capped below ``asked``; 1 when it states none (the server takes no ``n`` at all).
    """
    if asked <= 1 or not N_REJECTED.search(message):
        return None
    stated = [int(x) for x in N_MAXIMUM.findall(message)]
    return max(1, min(min(stated), asked - 1)) if stated else 1


def parse_options(spec: GenerationSpec) -> dict[str, Any]:
    """Typed options with defaults; refuses unknown keys and any attempt to pass the key itself."""
    for key, _ in spec.options:
        if key in ("api_key", "key", "token"):
            raise PolytoxError(
                f"refusing --model-opt {key}=...: an API key would be stored in the run "
                "manifest. Put it in an environment variable and pass "
                "--model-opt api_key_env=NAME"
            )
    opts = with_defaults("backend 'openai'", OpenAIGenerator.OPTIONS, dict(spec.options), flag="--model-opt")
    if not opts.get("base_url"):
        raise PolytoxError("the openai backend needs --model-opt base_url=URL (e.g. http://127.0.0.1:8000/v1)")
    if opts["endpoint"] == "auto":
        opts["endpoint"] = "chat" if spec.chat_template == "always" else "completions"
    return opts


@dataclass
class Call:
    """One HTTP request: the polytox requests it answers (n = their number) and the seed it carries."""

    requests: list[GenerationRequest]
    seed: int


@dataclass
class CallStats:
    """Counters for the manifest and tests (thread-safe increments)."""

    http_requests: int = 0
    retries: int = 0
    failed_calls: int = 0
    n_rejected: int = 0  # calls refused for their n and split into smaller ones
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)


def split_call(call: Call, max_n: int | None) -> list[Call]:
    """``call`` as calls of at most ``max_n`` consecutive samples, each with its first sample's seed."""
    if max_n is None or len(call.requests) <= max_n:
        return [call]
    parts = [call.requests[i : i + max_n] for i in range(0, len(call.requests), max_n)]
    return [Call(part, call.seed if i == 0 else part[0].seed) for i, part in enumerate(parts)]


def choice_tokens(choice: dict[str, Any], text: str) -> int | None:
    """A choice's token count from its log-probabilities, in any of the formats servers return.

    Chat (and llama.cpp's completions): ``logprobs.content`` has one entry per token; OpenAI's and vLLM's
    completions: ``logprobs.tokens``. A choice that stopped on an end-of-sequence token lists that token
    last (llama.cpp: an entry with empty text); it is not part of the continuation and is not counted,
    the same count as the transformers and vLLM backends give. None when there are no log-probabilities.
    """
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    entries: list[Any] | None = None
    for key in ("content", "tokens"):
        if isinstance(logprobs.get(key), list):
            entries = logprobs[key]
            break
    if entries is None:
        return None
    if entries and choice.get("finish_reason") == "stop":
        last = entries[-1].get("token") if isinstance(entries[-1], dict) else entries[-1]
        if not isinstance(last, str) or last == "" or not text.endswith(last):
            return len(entries) - 1
    return len(entries)


def usage_split(total: int | None, finishes: Sequence[str], max_tokens: int) -> list[int]:
    """Per-choice counts from ``usage`` alone (``total`` = the sum over the choices, as OpenAI and vLLM
    report it): ``length`` choices have ``max_tokens``; the others share the rest, less the
    end-of-sequence token each of them ended with (servers count it, polytox does not)."""
    if not isinstance(total, int):
        return [0] * len(finishes)
    early = [i for i, f in enumerate(finishes) if f != "length"]
    rest = max(0, total - max_tokens * (len(finishes) - len(early)) - len(early))
    counts = [max_tokens] * len(finishes)
    for rank, i in enumerate(early):
        counts[i] = rest // len(early) + (1 if rank < rest % len(early) else 0)
    return counts


def plan_calls(requests: Sequence[GenerationRequest], n_mode: str) -> list[Call]:
    """``n`` mode: one call per prompt (seed of its lowest sample); ``repeat``: one call per sample."""
    if n_mode == "repeat":
        return [Call([r], r.seed) for r in requests]
    groups: dict[str, list[GenerationRequest]] = {}
    for r in requests:
        groups.setdefault(r.prompt.id, []).append(r)
    calls = []
    for group in groups.values():
        group.sort(key=lambda r: r.sample_index)
        calls.append(Call(group, group[0].seed))
    return calls


def check_reachable(base_url: str, timeout: float = 5.0) -> None:
    """Refuse a ``base_url`` that is not an http(s) URL, or whose host does not accept a TCP connection
    (a closed port, an unknown host): no request of the run could succeed, so the run does not start.

    Only a connection is opened (no HTTP request reaches the server). Behind a proxy the proxy decides,
    so nothing is checked there.
    """
    import socket
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlsplit(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise PolytoxError(f"openai option base_url={base_url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(parsed.hostname):
        return
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError as exc:
        raise PolytoxError(f"openai option base_url={base_url!r}: {exc}") from None
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise PolytoxError(
            f"the openai backend cannot reach base_url {base_url} ({reason}): start the server "
            "(e.g. vllm serve MODEL, llama-server) or fix --model-opt base_url"
        ) from None


class OpenAIGenerator(Generator):
    """Generation through an OpenAI-compatible HTTP API, with a thread pool, rate limit and retries."""

    name = "openai"
    OPTIONS: ClassVar[Mapping[str, Option]] = {
        "base_url": Option("str", help="the server's API root, e.g. http://127.0.0.1:8000/v1 (required)"),
        "endpoint": Option(
            choices=("auto", "completions", "chat"), default="auto", help="auto: chat with --chat-template always"
        ),
        "api_key_env": Option("str", default="OPENAI_API_KEY", help="environment variable holding the API key"),
        "n_mode": Option(choices=("n", "repeat"), default="n", help="K samples in one call (n) or K calls (repeat)"),
        "send_seed": Option("bool", default=True, help="send each call's seed (folded to int32)"),
        "concurrency": Option("int", range=R.AT_LEAST_ONE, default=8, help="requests in flight"),
        "rate": Option("float", range=R.NON_NEGATIVE, default=0.0, help="requests per second (0: no limit)"),
        "max_retries": Option("int", range=R.COUNT, default=6, help="retries of a transient failure"),
        "timeout": Option("float", range=R.POSITIVE, default=60.0, help="seconds one request may take"),
        "backoff": Option("float", range=R.NON_NEGATIVE, default=0.5, help="first retry's backoff in seconds"),
        "max_backoff": Option("float", range=R.NON_NEGATIVE, default=30.0, help="longest backoff in seconds"),
        "empty_prompt": Option("str", default="", help="text sent for an empty prompt (completions endpoint)"),
        "token_counts": Option(
            choices=("logprobs", "usage"), default="logprobs", help="how each choice's tokens are counted"
        ),
    }

    @classmethod
    def check(cls, spec: GenerationSpec) -> None:
        """Options, the API key variable and the server's address, before any work."""
        options = parse_options(spec)
        env = options["api_key_env"]
        if not os.environ.get(env) and any(k == "api_key_env" for k, _ in spec.options):
            raise PolytoxError(f"the environment variable {env} (named by api_key_env) is not set")
        check_reachable(options["base_url"])

    def __init__(self, spec: GenerationSpec) -> None:
        self.spec = spec
        self.options = parse_options(spec)
        self._requests = require("requests", "api")
        self._tenacity = require("tenacity", "api")
        env = self.options["api_key_env"]
        self.__key = os.environ.get(env) or None
        if self.__key is None and any(k == "api_key_env" for k, _ in spec.options):
            raise PolytoxError(f"the environment variable {env} (named by api_key_env) is not set")
        self.url = self.options["base_url"].rstrip("/") + (
            "/chat/completions" if self.options["endpoint"] == "chat" else "/completions"
        )
        self.limiter = TokenBucket(self.options["rate"], 1)
        self.stats = CallStats()
        self.max_n: int | None = None  # learned from a server that rejected a larger n
        self.n_fallback: dict[str, Any] | None = None
        self._n_lock = threading.Lock()
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.options["concurrency"], thread_name_prefix="polytox-http")
        self.dead: str | None = None  # set once the server is gone: every later call fails at once

    def describe(self) -> dict[str, Any]:
        shown = {k: v for k, v in self.options.items() if k != "api_key_env"}
        return {
            "backend": self.name,
            "model": self.spec.model,
            **shown,
            "api_key_env": self.options["api_key_env"],
            "api_key_set": self.__key is not None,
            "n_fallback": None if self.n_fallback is None else dict(self.n_fallback),
        }

    # ---- HTTP -----------------------------------------------------------------------------------
    def _session(self) -> Any:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._requests.Session()
            self._local.session = session
        return session

    def _scrub(self, text: str) -> str:
        return text.replace(self.__key, "***") if self.__key else text

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        return headers

    def payload(self, call: Call) -> dict[str, Any]:
        """The JSON body of one call."""
        spec, text = self.spec, call.requests[0].prompt.text
        body: dict[str, Any] = {
            "model": spec.model,
            "max_tokens": spec.max_new_tokens,
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "n": len(call.requests),
        }
        if spec.top_k > 0:
            body["top_k"] = spec.top_k  # an extension (vLLM, TGI); OpenAI itself rejects it
        if self.options["token_counts"] == "logprobs":
            body["logprobs"] = True if self.options["endpoint"] == "chat" else 1  # per-choice token counts
        if self.options["send_seed"]:
            body["seed"] = api_seed(call.seed)
        if self.options["endpoint"] == "chat":
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text if text else self.options["empty_prompt"]
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.dead is not None:  # another call found the server gone: stop retrying this one too
            raise FatalGenerationError(self.dead)
        self.limiter.acquire()
        self.stats.add(http_requests=1)
        exc_mod = self._requests.exceptions
        try:
            resp = self._session().post(
                self.url, data=json.dumps(body), headers=self._headers(), timeout=self.options["timeout"]
            )
        except exc_mod.ConnectionError as exc:  # refused, reset, aborted (and connect timeouts)
            raise ServerUnreachableError(
                f"HTTP_TIMEOUT_OR_CONNECTION: {type(exc).__name__}: {self._scrub(str(exc))[:300]}"
            ) from exc
        except exc_mod.Timeout as exc:  # connected, but no answer in time: this request, not the server
            raise TransientHTTPError(
                f"HTTP_TIMEOUT_OR_CONNECTION: {type(exc).__name__}: {self._scrub(str(exc))[:300]}"
            ) from exc
        if resp.status_code == 200:
            try:
                data: dict[str, Any] = resp.json()
                return data
            except ValueError as exc:
                raise TransientHTTPError(f"HTTP_200_BAD_JSON: {self._scrub(resp.text)[:300]}") from exc
        message = self._scrub(resp.text)[:300]
        if resp.status_code in TRANSIENT_STATUS or resp.status_code >= 500:
            retry_after = resp.headers.get("Retry-After")
            try:
                hint = float(retry_after) if retry_after is not None else None
            except ValueError:
                hint = None
            raise TransientHTTPError(f"HTTP_{resp.status_code}: {message}", hint)
        raise PermanentHTTPError(f"HTTP_{resp.status_code}: {message}", resp.status_code)

    def _wait(self, state: Any) -> float:
        jitter = self._tenacity.wait_random_exponential(
            multiplier=self.options["backoff"], max=self.options["max_backoff"]
        )(state)
        exc = state.outcome.exception() if state.outcome else None
        hint = getattr(exc, "retry_after", None)
        return float(max(jitter, min(hint, self.options["max_backoff"]))) if hint else float(jitter)

    def _post_with_retries(self, body: dict[str, Any]) -> dict[str, Any]:
        t = self._tenacity

        def before_sleep(state: Any) -> None:
            self.stats.add(retries=1)

        retrying = t.Retrying(
            stop=t.stop_after_attempt(self.options["max_retries"] + 1),
            wait=self._wait,
            retry=t.retry_if_exception_type(TransientHTTPError),
            reraise=True,
            before_sleep=before_sleep,
        )
        result: dict[str, Any] = retrying(self._post, body)
        return result

    # ---- generation ------------------------------------------------------------------------------
    def _one_call(self, call: Call) -> list[Generation]:
        if self.dead is not None:
            raise FatalGenerationError(self.dead)
        text = call.requests[0].prompt.text
        if text == "" and self.options["endpoint"] == "chat":
            return [
                failed(
                    r,
                    "UNPROMPTED_NOT_SUPPORTED: the chat endpoint cannot start from the start "
                    "token alone; use --model-opt endpoint=completions",
                )
                for r in call.requests
            ]
        return [g for part in split_call(call, self.max_n) for g in self._send(part)]

    def _send(self, call: Call) -> list[Generation]:
        start = time.monotonic()
        try:
            data = self._post_with_retries(self.payload(call))
        except ServerUnreachableError as exc:
            if self.dead is None:
                self.dead = (
                    f"HTTP_SERVER_GONE: no connection to {self.url} in "
                    f"{self.options['max_retries'] + 1} attempts over {time.monotonic() - start:.0f} s "
                    f"(the retry budget, max_retries={self.options['max_retries']}): {exc}"
                )
            raise FatalGenerationError(self.dead) from exc
        except PermanentHTTPError as exc:
            limit = allowed_n(str(exc), len(call.requests)) if exc.status == 400 else None
            if limit is not None:  # the server takes fewer samples per call: split, lose nothing
                self._lower_max_n(limit, len(call.requests), str(exc))
                return [g for part in split_call(call, limit) for g in self._send(part)]
            self.stats.add(failed_calls=1)
            return [failed(r, str(exc)) for r in call.requests]
        except TransientHTTPError as exc:
            self.stats.add(failed_calls=1)
            return [failed(r, f"{exc} (after {self.options['max_retries'] + 1} attempts)") for r in call.requests]
        return self._parse(call, data)

    def _lower_max_n(self, limit: int, asked: int, message: str) -> None:
        """Remember the server's maximum n (the lowest seen), count the split and say so once per change."""
        self.stats.add(n_rejected=1)
        with self._n_lock:
            if self.max_n is not None and self.max_n <= limit:
                self.n_fallback = {**(self.n_fallback or {}), "rejected_calls": self.stats.n_rejected}
                return
            self.max_n = limit
            self.n_fallback = {
                "max_n": limit,
                "rejected_n": asked,
                "rejected_calls": self.stats.n_rejected,
                "mode": "repeat" if limit == 1 else "smaller_n",
                "server_error": message[:200],
            }
        log.warning(
            "the server rejected n=%d (%s); sending at most n=%d per request from now on (%s), no sample is lost",
            asked,
            message[:120],
            limit,
            "one call per sample" if limit == 1 else "calls split by sample",
        )

    def _content(self, choice: dict[str, Any]) -> Any:
        if self.options["endpoint"] == "chat":
            return (choice.get("message") or {}).get("content")
        return choice.get("text")

    def _parse(self, call: Call, data: dict[str, Any]) -> list[Generation]:
        choices = data.get("choices")
        if not isinstance(choices, list):
            message = f"BAD_RESPONSE: no 'choices' in {json.dumps(data)[:200]}"
            return [failed(r, message) for r in call.requests]
        by_index = {int(c.get("index", i)): c for i, c in enumerate(choices) if isinstance(c, dict)}
        total = (data.get("usage") or {}).get("completion_tokens")
        n = len(call.requests)
        picked = [by_index.get(j) for j in range(n)]
        finishes = ["length" if c is not None and c.get("finish_reason") == "length" else "stop" for c in picked]
        per_choice = [choice_tokens(c, str(self._content(c) or "")) if c is not None else None for c in picked]
        fallback = usage_split(total if isinstance(total, int) else None, finishes, self.spec.max_new_tokens)
        out = []
        for j, r in enumerate(call.requests):
            choice = picked[j]
            if choice is None:
                out.append(failed(r, f"BAD_RESPONSE: {len(choices)} choices for n={n}"))
                continue
            content = self._content(choice)
            if content is None:
                out.append(failed(r, f"NO_TEXT: finish_reason={choice.get('finish_reason')!r}"))
                continue
            counted = per_choice[j]
            if finishes[j] == "length":  # stopped by the limit: exactly max_tokens, whatever was listed
                tokens = self.spec.max_new_tokens
            else:
                tokens = fallback[j] if counted is None else counted
            out.append(
                Generation(
                    prompt_id=r.prompt.id,
                    sample_index=r.sample_index,
                    text=str(content),
                    finish_reason=finishes[j],  # type: ignore[arg-type]
                    n_tokens=tokens,
                )
            )
        return out

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        calls = plan_calls(requests, self.options["n_mode"])
        results = list(self._pool.map(self._one_call, calls))
        out = [g for gens in results for g in gens]
        order = {(r.prompt.id, r.sample_index): i for i, r in enumerate(requests)}
        return sorted(out, key=lambda g: order[(g.prompt_id, g.sample_index)])

    def retry_requests(
        self, failed: Sequence[GenerationRequest], shard: Sequence[GenerationRequest]
    ) -> list[GenerationRequest]:
        """``n`` mode: a prompt's samples come from calls seeded with their first sample's seed, so a failed
        sample is regenerated by sending its whole prompt again; ``repeat`` mode: the failed samples."""
        if self.options["n_mode"] == "repeat":
            return list(failed)
        prompts = {r.prompt.id for r in failed}
        return [r for r in shard if r.prompt.id in prompts]

    @classmethod
    def default_batch_size(cls, samples: int) -> int:
        return max(1, 256 // max(1, samples))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
