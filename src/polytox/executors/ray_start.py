"""Starting Ray for polytox's Ray jobs (the eval executor, ``corpus score`` and the overlap join): one helper.

``start_ray`` connects to a cluster (``--ray-address``) or starts a local Ray with enough logical CPUs for the
job's actors, forwards the driver's polytox, Hugging Face and thread settings to the workers, and keeps Ray and
Ray Data quiet (no dashboard, no progress bars). ``ray_session`` turns Ray's own exceptions into one clear error
and shuts Ray down when ``start_ray`` started it. ``closing_rows`` iterates a Ray dataset's rows so that none of
Ray Data's threads outlives the iteration (and so reaches Ray after that shutdown).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..errors import PolytoxError, require

FORWARDED_ENV_PREFIXES = ("POLYTOX_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "OMP_")


def start_ray(address: str | None, cpus_needed: float, env: Mapping[str, str] | None = None) -> bool:
    """Connect to (or start) Ray; True when this call started it (and must shut it down). A local Ray gets
    at least ``cpus_needed`` logical CPUs, whatever this machine has; ``env`` adds variables for the workers
    (held in memory only, never written)."""
    ray = require("ray", "ray")
    require("ray.data", "ray")
    started = False
    if not ray.is_initialized():
        forwarded = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": "ERROR",
            "runtime_env": {"env_vars": {**forwarded, **(env or {})}},
        }
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = int(max(os.cpu_count() or 1, cpus_needed + 0.999))
        ray.init(**kwargs)
        started = True
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    if hasattr(ctx, "print_on_execution_start"):
        ctx.print_on_execution_start = False
    return started


@contextmanager
def ray_session(ray: Any, started: bool) -> Iterator[None]:
    """Run a Ray job: Ray's own exceptions become one clear PolytoxError; Ray is shut down if we started it."""
    try:
        yield
    except (KeyboardInterrupt, PolytoxError):
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("ray"):
            raise PolytoxError(f"the Ray executor failed: {type(exc).__name__}: {exc}") from exc
        raise
    finally:
        if started:
            ray.shutdown()


# Ray Data's per-iteration threads: ``iter_threaded`` workers run the block pipeline and the streaming
# executor; they still call Ray for a moment after the consumer closes the rows. ("Prefetcher", also per
# iteration, parks forever on a condition once left and never calls Ray again.)
_RAY_DATA_WORKERS = ("iter_threaded", "StreamingExecutor")
_JOIN_SECONDS = 60.0


@contextmanager
def closing_rows(rows: Iterable[Any]) -> Iterator[Iterator[Any]]:
    """Ray Data's rows, closed on the way out, before Ray is shut down: a loop left early (a fatal failure)
    stops the streaming executor here, and the threads Ray Data started for this iteration are waited for
    (at most a minute). Closing only signals them: a worker inside a Ray call finishes it, then closes its
    pipeline (more Ray calls). Left running past ``ray.shutdown()``, such a call either starts a new local
    Ray in the caller's process or meets a core worker mid-shutdown, and Ray then ends the whole process
    with exit status 1 and no message on stdout ("The core worker has already been shutdown ... The
    process will exit")."""
    before = set(threading.enumerate())
    iterator = iter(rows)
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
        deadline = time.monotonic() + _JOIN_SECONDS
        for thread in threading.enumerate():
            if thread not in before and thread.name.startswith(_RAY_DATA_WORKERS):
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
