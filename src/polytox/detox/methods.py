"""``--detox NAME[:key=value,...]``: parse, canonicalise (for the spec hash) and build adjusters."""

from __future__ import annotations

from typing import Any

from ..errors import PolytoxError
from .base import LogitsAdjuster

# name -> (module, class, known option keys)
METHODS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "word-filter": ("word_filter", "WordFilter", ("list", "end")),
    "vocab-shift": ("vocab_shift", "VocabShift", ("path", "beta")),
    "dexperts": ("dexperts", "DExperts", ("expert", "anti", "alpha")),
    "atcon": ("atcon", "AttributeToken", ("token",)),
    "pplm": ("pplm", "PPLM", ("head", "step_size", "iterations", "gamma", "gm_scale", "kl_scale", "top_k", "horizon")),
}


def parse_detox(value: str) -> tuple[str, dict[str, str]]:
    """``NAME[:k=v,...]`` -> (name, options); unknown names and keys are clear errors."""
    name, _, rest = value.strip().partition(":")
    name = name.strip().lower().replace("_", "-")
    if name not in METHODS:
        raise PolytoxError(f"unknown --detox method {name!r}; known: {', '.join(METHODS)}")
    options: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, val = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise PolytoxError(f"--detox {name}: option {item!r} is not KEY=VALUE")
        if key not in METHODS[name][2]:
            raise PolytoxError(f"--detox {name}: unknown option {key!r}; known: {', '.join(METHODS[name][2])}")
        options[key] = val.strip()
    return name, options


def canonical_detox(value: str) -> str:
    """One spelling per method + options (sorted keys), so equal settings hash equally."""
    name, options = parse_detox(value)
    return name + (":" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) if options else "")


# Options naming files: left out of the short label a leaderboard shows.
PATH_OPTIONS = frozenset({"list", "path", "expert", "anti", "head"})


def short_label(value: str) -> str:
    """``vocab-shift(beta=3)``: the method and its non-path options, for tables."""
    name, options = parse_detox(value)
    shown = [f"{k}={v}" for k, v in sorted(options.items()) if k not in PATH_OPTIONS]
    return name + (f"({','.join(shown)})" if shown else "")


def build_adjuster(spec: Any, generator: Any) -> LogitsAdjuster | None:
    """The adjuster of ``spec.detox`` bound to a loaded transformers generator, or None."""
    if not getattr(spec, "detox", ""):
        return None
    import importlib

    name, options = parse_detox(spec.detox)
    module, cls, _ = METHODS[name]
    klass = getattr(importlib.import_module(f"{__package__}.{module}"), cls)
    adjuster: LogitsAdjuster = klass(generator, options)
    return adjuster
