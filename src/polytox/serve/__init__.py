"""``polytox serve``: a local drop-in for Perspective's ``comments:analyze`` and OpenAI's ``/v1/moderations``.

One job per module: ``app`` (routes, lifecycle), ``perspective_api`` (the Perspective contract),
``moderation_api`` (the OpenAI moderation contract), ``batch_http`` (Google's multipart batch requests),
``batcher`` (micro-batching into the scorer), ``quotas`` (API keys and per-key token buckets), ``metrics``
(Prometheus), ``discovery`` (the discovery document Google's client library reads), ``errors`` (Google's
error shape), ``runner`` (uvicorn in the foreground or in a background thread).

Starlette, uvicorn and prometheus-client are the optional extra ``serve``; nothing here is imported by
``import polytox``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_getattr

if TYPE_CHECKING:
    from .app import ServeConfig, create_app
    from .runner import ServerThread, serve_forever

INSTALL_HINT = 'pip install "polytox[serve]"'

__all__ = ["ServeConfig", "ServerThread", "create_app", "serve_forever"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "ServeConfig": ".app",
        "create_app": ".app",
        "ServerThread": ".runner",
        "serve_forever": ".runner",
    },
)
