"""Scorers the Python API keeps loaded: one per name and options per process, and an explicit handle.

Building a local scorer loads its model (the default scorer's backbone takes seconds), so a notebook that
calls ``polytox.score`` in a loop would pay that load on every call. ``shared_scorer`` builds each
``(name, options)`` once and hands the same object to every later call, from any thread (the build runs
under a lock; a scorer that is not ``thread_safe`` serialises its own ``score`` calls, ``scoring.base``).
``close_scorers`` releases them (and runs at interpreter exit). ``api.handle.scorer()`` returns a handle that
owns its own scorer for a ``with`` block, for code that wants the memory back when it is done.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..spec import parse_options

if TYPE_CHECKING:
    from ..scoring.base import Scorer

Options = Mapping[str, Any] | Sequence[str]
Key = tuple[str, tuple[tuple[str, str], ...], str]

_LOCK = threading.Lock()
_SHARED: dict[Key, Scorer] = {}
_BUILDING: dict[Key, threading.Lock] = {}


def normalise_options(options: Options | None) -> dict[str, str]:
    """Options as ``polytox score`` reads its ``--scorer-opt`` flags: a mapping or ``KEY=VALUE`` strings."""
    return {str(k): str(v) for k, v in parse_options(options or {}).items()}


def _key(name: str, opts: Mapping[str, str]) -> Key:
    """Name, options and the score cache the build would open (``$POLYTOX_CACHE_DIR`` may change between
    calls), so a call never gets a scorer writing to another cache than its own build would."""
    from .._util.paths import default_cache_dir

    cache = "" if "cache" in opts else str(default_cache_dir())
    return (name, tuple(sorted(opts.items())), cache)


def shared_scorer(name: str, opts: Mapping[str, str]) -> Scorer:
    """The process's scorer for ``name`` with ``opts``, built on first use and reused after.

    Two threads asking for the same scorer at once build it once (a lock per key); different scorers build
    in parallel. A failed build (an unknown name, a bad option) raises and stores nothing."""
    from ..scoring import build_scorer

    key = _key(name, opts)
    with _LOCK:
        built = _SHARED.get(key)
        if built is not None:
            return built
        gate = _BUILDING.setdefault(key, threading.Lock())
    with gate:
        with _LOCK:
            built = _SHARED.get(key)
        if built is None:
            built = build_scorer(name, dict(opts))
            with _LOCK:
                _SHARED[key] = built
    return built


def loaded_scorers() -> list[str]:
    """The ids of the scorers ``polytox.score`` holds loaded, in build order."""
    with _LOCK:
        return [s.id for s in _SHARED.values()]


def close_scorers() -> None:
    """Close and forget every scorer ``polytox.score`` has kept; the next call builds afresh."""
    with _LOCK:
        held = list(_SHARED.values())
        _SHARED.clear()
        _BUILDING.clear()
    for built in held:
        built.close()


atexit.register(close_scorers)
