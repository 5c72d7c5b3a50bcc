"""The ``polytox serve`` subcommand: checks the listen address and keys, then starts the app of
``polytox.serve`` (extra "serve").
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import PolytoxError
from .flags import add_scorer_flags
from .score_cmd import scorer_choice

DESCRIPTION = """\
Answer Perspective's comments:analyze and OpenAI's /v1/moderations locally with any polytox scorer.

Code written for Perspective switches by changing only the host. Keys come from the environment variable
POLYTOX_SERVE_KEYS (comma-separated) or --keys-file (one per line); --open serves without keys. Scores go
through the same score cache as polytox score (disable with --scorer-opt cache=off).

example:
  POLYTOX_SERVE_KEYS=secret polytox serve --scorer default --port 8080
"""  # the user-facing text of --help (the module docstring is for developers)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a scorer as a local Perspective API / OpenAI moderation endpoint",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scorer_flags(p, unset=True)  # a --config file may name them
    p.add_argument("--config", help="YAML with 'scorer' and 'scorer_opt'; flags win")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--keys-file", help="file of accepted API keys, one per line (also: $POLYTOX_SERVE_KEYS)")
    p.add_argument("--open", action="store_true", help="accept requests without a valid key")
    p.add_argument(
        "--qps",
        type=float,
        default=0.0,
        help="per-key quota in comments per second, as Perspective's (default 0: no quota)",
    )
    p.add_argument("--burst", type=float, default=0.0, help="per-key burst (default: max(1, qps))")
    p.add_argument("--max-batch", type=int, default=64, help="texts per scorer call (default 64)")
    p.add_argument(
        "--max-wait-ms", type=float, default=2.0, help="how long a request waits to share a batch (default 2 ms)"
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=1024,
        help="texts waiting for the scorer before requests get 429 (default 1024)",
    )
    p.add_argument(
        "--max-queue-wait",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="refuse a request with 429 + Retry-After when its estimated wait for the scorer (queue depth / "
        "measured throughput) is over SECONDS, so answered requests stay fast under overload (default 2; 0: off)",
    )
    p.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body (default 1 MiB)")
    p.add_argument(
        "--span-annotations",
        choices=["sentence", "off"],
        default="sentence",
        help="answer spanAnnotations with per-sentence scores, or refuse it (default sentence)",
    )
    p.add_argument(
        "--flag-threshold",
        type=float,
        default=None,
        help="/v1/moderations 'flagged' threshold (default 0.5, RTP's toxic cut)",
    )
    p.add_argument(
        "--graceful-seconds",
        type=float,
        default=30.0,
        help="how long shutdown waits for in-flight requests (default 30)",
    )
    p.add_argument("--access-log", action="store_true", help="log each request (path only, never the key)")
    p.set_defaults(func=run)


def check_listen(host: str, port: int) -> None:
    """Bind HOST:PORT once and let go, before the scorer loads: an unknown host or a port in use is one
    clear error line (exit 2), not a server that dies after "startup complete"."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise PolytoxError(f"--host {host}: cannot resolve it ({exc})") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise PolytoxError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port or --host"
            ) from exc


def served_options(name: str, options: dict[str, str]) -> dict[str, str]:
    """The scorer options ``serve`` builds with: the default scorer answers Perspective's eight attributes
    unless ``attributes`` is given (RTP's, DExperts' and HELM's clients ask for all eight; the seven heads
    cost about nothing beside TOXICITY's backbone pass, docs/scorer-attributes.md), and TOXICITY's values do
    not change with them. The n-gram mode reads TOXICITY only."""
    if name in ("default", "polytox-ml") and "attributes" not in options and options.get("mode") != "ngram":
        return {**options, "attributes": "rtp"}
    return options


def run(args: argparse.Namespace) -> int:
    from .. import constants as C
    from ..errors import require

    for module in ("starlette", "uvicorn", "prometheus_client"):  # a clear install hint, not a traceback
        require(module, "serve")
    from ..scoring import build_scorer
    from ..serve.app import ServeConfig, create_app
    from ..serve.quotas import KeyStore
    from ..serve.runner import serve_forever

    keys = KeyStore.load(args.keys_file, args.open)
    check_listen(args.host, args.port)
    name, options = scorer_choice(args)
    options = served_options(name, options)
    config = ServeConfig(
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        max_queue=args.max_queue,
        max_queue_wait_s=args.max_queue_wait,
        qps=args.qps,
        burst=args.burst,
        max_body_bytes=args.max_body_bytes,
        span_annotations=args.span_annotations == "sentence",
        flag_threshold=C.TOXIC_THRESHOLD if args.flag_threshold is None else args.flag_threshold,
        access_log=args.access_log,
    )
    scorer = build_scorer(name, options)
    try:
        serve_forever(create_app(scorer, keys, config), args.host, args.port, args.graceful_seconds)
    except KeyboardInterrupt:  # Ctrl-C is how a server is stopped: not an interrupted job to resume
        pass
    except SystemExit as exc:  # uvicorn exits when it cannot start (e.g. the port was taken meanwhile)
        raise PolytoxError(
            f"the server could not start on {args.host}:{args.port} (exit {exc.code}); see the log above"
        ) from exc
    finally:
        scorer.close()
    print("polytox: server stopped", file=sys.stderr)
    return 0
