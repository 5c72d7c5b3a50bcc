"""Starting ``polytox serve`` in-process on 127.0.0.1 and talking to it over real HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from polytox.scoring import build_scorer
from polytox.scoring.base import Scorer
from polytox.serve.app import ServeConfig, create_app
from polytox.serve.quotas import KeyStore
from polytox.serve.runner import ServerThread

KEY = "test-key-0123"
ANALYZE = "/v1alpha1/comments:analyze"

# English texts the svm scorer rates very differently (used to check each answer matches its request).
TEXTS = ["What a lovely afternoon in the park.", "You are a stupid idiot and I hate you.",
         "The meeting moved to Thursday at noon.", "Shut up, you worthless moron.",
         "Thanks for the thoughtful review.", "This is the dumbest crap I have ever read.",
         "We planted tomatoes and basil this spring.", "Go to hell, loser."]


@contextmanager
def running(scorer: str | Scorer = "svm", options: Mapping[str, str] | None = None, keys: tuple[str, ...] = (KEY,),
            open_access: bool = False, **config: Any) -> Iterator[ServerThread]:
    """A server for ``scorer`` (built through the registry, cache off unless given) on a free port."""
    owned = isinstance(scorer, str)
    obj = build_scorer(scorer, {"cache": "off", **(options or {})}) if isinstance(scorer, str) else scorer
    srv = ServerThread(create_app(obj, KeyStore(keys, open_access), ServeConfig(**config))).start()
    try:
        yield srv
    finally:
        srv.stop()
        if owned:
            obj.close()


def call(url: str, path: str, body: Any = None, *, raw: bytes | None = None, method: str = "POST",
         headers: Mapping[str, str] | None = None, conn: http.client.HTTPConnection | None = None,
         ) -> tuple[int, dict[str, str], Any]:
    """One request; (status, lower-case headers, JSON body or raw bytes when not JSON)."""
    parts = urlsplit(url)
    own = conn is None
    conn = conn or http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"} if data is not None and raw is None else {}
    hdrs.update(headers or {})
    try:
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        out_headers = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        if own:
            conn.close()
    try:
        parsed: Any = json.loads(payload)
    except ValueError:
        parsed = payload
    return resp.status, out_headers, parsed


def analyze_body(text: str, attributes: tuple[str, ...] = ("TOXICITY",), **extra: Any) -> dict[str, Any]:
    return {"comment": {"text": text}, "requestedAttributes": {a: {} for a in attributes}, **extra}


def error_reason(body: Any) -> str | None:
    """``errorType`` of a Google-shaped error body (None when it has none)."""
    details = body["error"].get("details") or [{}]
    return details[0].get("errorType")
