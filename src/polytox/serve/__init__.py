"""``polytox serve``: a local drop-in for Perspective's ``comments:analyze`` and OpenAI's ``/v1/moderations``.

One job per module: ``app`` (routes, lifecycle), ``perspective_api`` (the Perspective contract),
``moderation_api`` (the OpenAI moderation contract), ``batch_http`` (Google's multipart batch requests),
``batcher`` (micro-batching into the scorer), ``quotas`` (API keys and per-key token buckets), ``metrics``
(Prometheus), ``discovery`` (the discovery document Google's client library reads), ``errors`` (Google's
error shape), ``runner`` (uvicorn in the foreground or in a background thread).

Starlette, uvicorn and prometheus-client are the optional extra ``serve``; nothing here is imported by
``import polytox``.
"""

INSTALL_HINT = 'pip install "polytox[serve]"'
