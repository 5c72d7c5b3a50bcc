"""Run the app with uvicorn: in the foreground (``polytox serve``) or on a background thread (tests,
benchmarks, notebooks).

Shutdown is graceful: on SIGINT/SIGTERM uvicorn stops accepting connections, lets in-flight requests
finish (up to ``graceful_s``), then the app's lifespan drains the scorer queue.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from . import INSTALL_HINT


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError(f"polytox serve needs uvicorn: {INSTALL_HINT}") from exc
    return uvicorn


def uvicorn_config(app: Any, host: str, port: int, graceful_s: float = 30.0, log_level: str = "info") -> Any:
    uvicorn = _uvicorn()
    from .protocol import MAX_HEAD_BYTES, LimitedH11Protocol

    # access_log off: uvicorn's access log prints the query string, which holds the API key.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=graceful_s,
        server_header=False,
        backlog=2048,
        http=LimitedH11Protocol,  # 431 for an oversized head, and no reset after a refusal
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )


def serve_forever(app: Any, host: str, port: int, graceful_s: float = 30.0) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn installs the handlers)."""
    _uvicorn().Server(uvicorn_config(app, host, port, graceful_s)).run()


class ServerThread:
    """``with ServerThread(app) as srv: requests to srv.url`` - uvicorn on 127.0.0.1, a free port."""

    def __init__(self, app: Any, host: str = "127.0.0.1", graceful_s: float = 10.0) -> None:
        self.app = app
        self.host = host
        self.port = 0  # known once started (uvicorn binds a free port)
        self.server = _uvicorn().Server(uvicorn_config(app, host, 0, graceful_s, log_level="warning"))
        self._thread = threading.Thread(target=self._run, name="polytox-serve", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self.server.serve())

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("polytox serve did not start")
            time.sleep(0.01)
        self.port = int(self.server.servers[0].sockets[0].getsockname()[1])
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
