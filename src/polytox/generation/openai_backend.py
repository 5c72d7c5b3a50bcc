"""OpenAI-compatible HTTP backend (``--backend openai``; ``pip install 'polytox[api]'``).

Talks to any server that speaks OpenAI's ``/v1/completions`` or ``/v1/chat/completions``: ``vllm serve``,
TGI's OpenAI API, OpenAI itself and other compatible services.

- K samples per prompt: one call with ``n=K`` (``n_mode=n``, default) or K calls with ``n=1``
  (``n_mode=repeat``, for servers without ``n``; each call carries its own sample's seed).
- ``seed`` is sent (folded to int32) unless ``send_seed=false``; whether it makes sampling reproducible
  depends on the server (vLLM: yes; OpenAI: "best effort").
- At most ``concurrency`` requests in flight; at most ``rate`` requests per second (0 = no limit).
- 429, 408, 5xx, timeouts and connection errors are retried (``max_retries``) with full-jitter exponential
  backoff (tenacity), honouring ``Retry-After``; other 4xx are permanent. A request that still fails is
  recorded as an error on each of its samples, never dropped and never turned into text.
- The API key is read from the environment variable named by ``api_key_env`` (default
  ``OPENAI_API_KEY``; unset = no ``Authorization`` header) and is never written anywhere: the spec only
  holds the variable's name, and error messages are scrubbed of the key. An ``api_key`` option is refused.
- ``endpoint``: ``completions`` | ``chat`` | ``auto`` (chat when ``--chat-template always``). The empty
  prompt (unprompted generation) is sent to completions as ``empty_prompt`` (default ``""``; for a vLLM
  server use ``<|endoftext|>`` or the model's BOS text); the chat endpoint cannot start from nothing and
  records an error.
- ``n_tokens``: exact from ``usage.completion_tokens`` with ``n=1``; with ``n>1`` servers report only the
  total, which is split over the choices (the sum is exact, the split is not).

Options: ``base_url`` (required, e.g. ``http://127.0.0.1:8000/v1``), ``endpoint``, ``api_key_env``,
``n_mode``, ``send_seed``, ``concurrency`` (8), ``rate`` (0), ``max_retries`` (6), ``timeout`` (60 s),
``backoff`` (0.5 s), ``max_backoff`` (30 s), ``empty_prompt``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import PolytoxError, require
from ..ratelimit import RateLimiter
from ..spec import GenerationSpec
from ..types import Generation, GenerationRequest
from .base import Generator, failed
from .vllm_backend import api_seed

TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


def _bool(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


OPTION_TYPES: dict[str, Callable[[str], Any]] = {
    "base_url": str, "endpoint": str, "api_key_env": str, "n_mode": str, "send_seed": _bool,
    "concurrency": int, "rate": float, "max_retries": int, "timeout": float, "backoff": float,
    "max_backoff": float, "empty_prompt": str,
}
DEFAULTS: dict[str, Any] = {
    "endpoint": "auto", "api_key_env": "OPENAI_API_KEY", "n_mode": "n", "send_seed": True, "concurrency": 8,
    "rate": 0.0, "max_retries": 6, "timeout": 60.0, "backoff": 0.5, "max_backoff": 30.0, "empty_prompt": "",
}


class TransientHTTPError(Exception):
    """A failure worth retrying; ``retry_after`` is the server's hint in seconds, if it gave one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentHTTPError(Exception):
    """A failure that retrying will not fix (400, 401, 404...)."""


def parse_options(spec: GenerationSpec) -> dict[str, Any]:
    """Typed options with defaults; refuses unknown keys and any attempt to pass the key itself."""
    opts = dict(DEFAULTS)
    for key, raw in spec.options:
        if key in ("api_key", "key", "token"):
            raise PolytoxError(f"refusing --model-opt {key}=...: an API key would be stored in the run "
                               "manifest. Put it in an environment variable and pass "
                               "--model-opt api_key_env=NAME")
        if key not in OPTION_TYPES:
            raise PolytoxError(f"unknown openai option {key!r}; known: {', '.join(sorted(OPTION_TYPES))}")
        try:
            opts[key] = OPTION_TYPES[key](raw)
        except ValueError as exc:
            raise PolytoxError(f"openai option {key}={raw!r}: {exc}") from exc
    if not opts.get("base_url"):
        raise PolytoxError("the openai backend needs --model-opt base_url=URL "
                           "(e.g. http://127.0.0.1:8000/v1)")
    if opts["endpoint"] == "auto":
        opts["endpoint"] = "chat" if spec.chat_template == "always" else "completions"
    if opts["endpoint"] not in ("completions", "chat"):
        raise PolytoxError("openai option endpoint must be completions, chat or auto")
    if opts["n_mode"] not in ("n", "repeat"):
        raise PolytoxError("openai option n_mode must be 'n' or 'repeat'")
    if opts["concurrency"] < 1:
        raise PolytoxError("openai option concurrency must be >= 1")
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
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for key, value in counts.items():
                setattr(self, key, getattr(self, key) + value)


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


class OpenAIGenerator(Generator):
    """Generation through an OpenAI-compatible HTTP API, with a thread pool, rate limit and retries."""

    name = "openai"

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
            "/chat/completions" if self.options["endpoint"] == "chat" else "/completions")
        self.limiter = RateLimiter(self.options["rate"], burst=1)
        self.stats = CallStats()
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.options["concurrency"], thread_name_prefix="polytox-http")

    def describe(self) -> dict[str, Any]:
        shown = {k: v for k, v in self.options.items() if k != "api_key_env"}
        return {"backend": self.name, "model": self.spec.model, **shown,
                "api_key_env": self.options["api_key_env"], "api_key_set": self.__key is not None}

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
        body: dict[str, Any] = {"model": spec.model, "max_tokens": spec.max_new_tokens,
                                "temperature": spec.temperature, "top_p": spec.top_p, "n": len(call.requests)}
        if spec.top_k > 0:
            body["top_k"] = spec.top_k  # an extension (vLLM, TGI); OpenAI itself rejects it
        if self.options["send_seed"]:
            body["seed"] = api_seed(call.seed)
        if self.options["endpoint"] == "chat":
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text if text else self.options["empty_prompt"]
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        self.limiter.acquire()
        self.stats.add(http_requests=1)
        exc_mod = self._requests.exceptions
        try:
            resp = self._session().post(self.url, data=json.dumps(body), headers=self._headers(),
                                        timeout=self.options["timeout"])
        except (exc_mod.Timeout, exc_mod.ConnectionError) as exc:
            raise TransientHTTPError(f"HTTP_TIMEOUT_OR_CONNECTION: {type(exc).__name__}: "
                                     f"{self._scrub(str(exc))[:300]}") from exc
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
        raise PermanentHTTPError(f"HTTP_{resp.status_code}: {message}")

    def _wait(self, state: Any) -> float:
        jitter = self._tenacity.wait_random_exponential(multiplier=self.options["backoff"],
                                                        max=self.options["max_backoff"])(state)
        exc = state.outcome.exception() if state.outcome else None
        hint = getattr(exc, "retry_after", None)
        return float(max(jitter, min(hint, self.options["max_backoff"]))) if hint else float(jitter)

    def _post_with_retries(self, body: dict[str, Any]) -> dict[str, Any]:
        t = self._tenacity

        def before_sleep(state: Any) -> None:
            self.stats.add(retries=1)

        retrying = t.Retrying(stop=t.stop_after_attempt(self.options["max_retries"] + 1), wait=self._wait,
                              retry=t.retry_if_exception_type(TransientHTTPError), reraise=True,
                              before_sleep=before_sleep)
        result: dict[str, Any] = retrying(self._post, body)
        return result

    # ---- generation ------------------------------------------------------------------------------
    def _one_call(self, call: Call) -> list[Generation]:
        text = call.requests[0].prompt.text
        if text == "" and self.options["endpoint"] == "chat":
            return [failed(r, "UNPROMPTED_NOT_SUPPORTED: the chat endpoint cannot start from the start "
                               "token alone; use --model-opt endpoint=completions") for r in call.requests]
        try:
            data = self._post_with_retries(self.payload(call))
        except (TransientHTTPError, PermanentHTTPError) as exc:
            self.stats.add(failed_calls=1)
            attempts = "" if isinstance(exc, PermanentHTTPError) else \
                f" (after {self.options['max_retries'] + 1} attempts)"
            return [failed(r, f"{exc}{attempts}") for r in call.requests]
        return self._parse(call, data)

    def _parse(self, call: Call, data: dict[str, Any]) -> list[Generation]:
        choices = data.get("choices")
        if not isinstance(choices, list):
            message = f"BAD_RESPONSE: no 'choices' in {json.dumps(data)[:200]}"
            return [failed(r, message) for r in call.requests]
        by_index = {int(c.get("index", i)): c for i, c in enumerate(choices) if isinstance(c, dict)}
        total = (data.get("usage") or {}).get("completion_tokens")
        n = len(call.requests)
        out = []
        for j, r in enumerate(call.requests):
            choice = by_index.get(j)
            if choice is None:
                out.append(failed(r, f"BAD_RESPONSE: {len(choices)} choices for n={n}"))
                continue
            if self.options["endpoint"] == "chat":
                content = (choice.get("message") or {}).get("content")
            else:
                content = choice.get("text")
            reason = choice.get("finish_reason")
            if content is None:
                out.append(failed(r, f"NO_TEXT: finish_reason={reason!r}"))
                continue
            finish = "length" if reason == "length" else "stop"
            tokens = int(total) // n + (1 if j < int(total) % n else 0) if isinstance(total, int) else 0
            out.append(Generation(prompt_id=r.prompt.id, sample_index=r.sample_index, text=str(content),
                                  finish_reason=finish, n_tokens=tokens))  # type: ignore[arg-type]
        return out

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        calls = plan_calls(requests, self.options["n_mode"])
        results = list(self._pool.map(self._one_call, calls))
        out = [g for gens in results for g in gens]
        order = {(r.prompt.id, r.sample_index): i for i, r in enumerate(requests)}
        return sorted(out, key=lambda g: order[(g.prompt_id, g.sample_index)])

    @classmethod
    def default_batch_size(cls, samples: int) -> int:
        return max(1, 256 // max(1, samples))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
