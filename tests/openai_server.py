"""A real HTTP server on 127.0.0.1 that speaks the OpenAI completions / chat completions API, errors included.

Text is deterministic in (prompt, seed, choice index); without a seed it varies per request, like a real
sampler. Directives inside the prompt text script failures, counted per prompt:
``[429xN]`` the first N requests get 429 (``Retry-After: 0``), ``[500xN]`` the first N get 500,
``[503]`` always 503, ``[400]`` always 400 with an OpenAI-style error body, ``[slowxN]`` the first N
requests sleep ``slow_seconds`` (so the client times out), ``[stop]`` finishes with ``stop``.
``max_n`` refuses larger ``n`` with a 400, worded like vLLM (``n_style="plain"``: "n must be <= 4") or like
llama.cpp (``n_style="llamacpp"``: "Field 'n': Value must be between 1 <= value <= 4, but got 5").
``usage`` counts a stopped choice's end-of-sequence token, as vLLM and llama.cpp do. ``usage_style="sum"``
reports the completion tokens of all choices (OpenAI, vLLM); ``"first"`` answers as llama.cpp does:
``usage`` counts choice 0 only, and a stopped choice's log-probabilities list the end-of-sequence token
last, with empty text. Log-probabilities, when asked for, come one
entry per token: OpenAI's legacy ``{"tokens": [...], "token_logprobs": [...]}`` on completions (llama.cpp
style: ``{"content": [...]}`` there too), ``{"content": [...]}`` on chat.
The server records every request (path, body, headers, time) and the peak number in flight.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORDS = ["you", "are", "a", "stupid", "idiot", "and", "the", "weather", "is", "nice", "today", "we", "walk",
         "home"]
def _invalid(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error"}}


DIRECTIVE = re.compile(r"\[(429|500|slow)x(\d+)\]")


class FakeOpenAI:
    """Owns the server thread and the recorded state; use as a context manager."""

    def __init__(self, api_key: str | None = None, latency: float = 0.0, slow_seconds: float = 1.0,
                 max_n: int = 128, n_style: str = "plain", usage_style: str = "sum") -> None:
        self.api_key = api_key
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.max_n = max_n
        self.n_style = n_style
        self.usage_style = usage_style
        self.log: list[dict[str, Any]] = []
        self.seen: Counter[str] = Counter()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lock = threading.Lock()
        self._unseeded = itertools.count()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- behaviour -----------------------------------------------------------------------------
    def text_for(self, prompt: str, seed: int | None, index: int, max_tokens: int) -> tuple[str, int, str]:
        key = f"{prompt}|{seed if seed is not None else 'x' + str(next(self._unseeded))}|{index}"
        rng = random.Random(key)
        n = max_tokens if "[stop]" not in prompt else max(1, max_tokens // 2)
        words = [rng.choice(WORDS) for _ in range(n)]
        return " " + " ".join(words), n, "length" if n == max_tokens else "stop"

    def respond(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any],
                                                                                          dict[str, str]]:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                   "code": "invalid_api_key"}}, {}
        chat = path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return 400, _invalid("'messages' is required"), {}
            prompt = str(messages[-1].get("content", ""))
        else:
            if "prompt" not in body:
                return 400, _invalid("'prompt' is required"), {}
            prompt = str(body["prompt"])
        with self.lock:
            self.seen[prompt] += 1
            count = self.seen[prompt]
        for kind, times in DIRECTIVE.findall(prompt):
            if count <= int(times):
                if kind == "429":
                    return 429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}, \
                        {"Retry-After": "0"}
                if kind == "500":
                    return 500, {"error": {"message": "internal error", "type": "server_error"}}, {}
                time.sleep(self.slow_seconds)
        if "[503]" in prompt:
            return 503, {"error": {"message": "overloaded", "type": "server_error"}}, {}
        if "[400]" in prompt:
            return 400, _invalid("This model's maximum context length is 8 tokens"), {}
        n = int(body.get("n", 1))
        if n > self.max_n:
            if self.n_style == "llamacpp":
                return 400, _invalid(f"Field 'n': Value must be between 1 <= value <= {self.max_n}, but got {n}"), {}
            return 400, _invalid(f"n must be <= {self.max_n}"), {}
        seed = body.get("seed")
        choices, counts = [], []
        for i in range(n):
            text, used, finish = self.text_for(prompt, seed, i, int(body.get("max_tokens", 16)))
            counts.append(used)
            content = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            choice: dict[str, Any] = {"index": i, "finish_reason": finish, **content}
            tokens = [" " + w for w in text.split()]
            llamacpp = self.usage_style == "first"
            if finish == "stop":
                counts[-1] += 1  # usage counts the end-of-sequence token (vLLM, llama.cpp)
                if llamacpp:
                    tokens.append("")  # llama.cpp also lists it last, with empty text
            content_style = {"content": [{"token": t, "logprob": -1.0} for t in tokens]}
            if chat and body.get("logprobs") is True:
                choice["logprobs"] = content_style
            elif not chat and isinstance(body.get("logprobs"), int) and body["logprobs"] >= 1:
                choice["logprobs"] = content_style if llamacpp else {"tokens": tokens,
                                                                     "token_logprobs": [-1.0] * len(tokens)}
            choices.append(choice)
        total = counts[0] if self.usage_style == "first" and counts else sum(counts)
        choices.reverse()  # the API does not promise index order
        obj = "chat.completion" if chat else "text_completion"
        return 200, {"id": f"cmpl-{count}", "object": obj, "model": body.get("model"), "choices": choices,
                     "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": total}}, {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                with server.lock:
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    length = int(self.headers.get("Content-Length", 0))
                    raw = self.rfile.read(length)
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        status, data, extra = 400, {"error": {"message": "invalid JSON"}}, {}
                        body = {}
                    else:
                        if server.latency:
                            time.sleep(server.latency)
                        status, data, extra = server.respond(self.path, body, headers)
                    with server.lock:
                        server.log.append({"path": self.path, "body": body, "headers": headers,
                                           "time": time.monotonic(), "status": status})
                    blob = json.dumps(data).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(blob)))
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(blob)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away
                finally:
                    with server.lock:
                        server.in_flight -= 1

        return Handler
