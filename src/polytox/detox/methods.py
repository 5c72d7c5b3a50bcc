"""``--detox NAME[:key=value,...]``: parse, canonicalise (for the spec hash) and build adjusters."""

from __future__ import annotations

from typing import Any

from .. import constants as C
from .._util import ranges as R
from .._util.options import Option, check_options, with_defaults
from ..errors import PolytoxError
from .base import LogitsAdjuster

# name -> (module, class, its options): each method's options declared once (``polytox._util.options``), with
# their kinds, ranges, defaults and whether they are required; the class receives them typed, every one present
# (its default when not given).
METHODS: dict[str, tuple[str, str, dict[str, Option]]] = {
    "word-filter": (
        "word_filter",
        "WordFilter",
        {
            "list": Option(
                "str", help="a word-list file or glin-profanity:LANG (default: $POLYTOX_LEXICON_DIR/en.txt, else :en)"
            ),
            "end": Option(choices=("eager", "exact"), default="eager", help="where a banned word may end"),
        },
    ),
    "vocab-shift": (
        "vocab_shift",
        "VocabShift",
        {
            "path": Option("str", required=True, help="required: a folder from polytox detox train vocab-shift"),
            "beta": Option("float", range=R.NON_NEGATIVE, default=C.VOCAB_SHIFT_BETA, help="shift strength"),
        },
    ),
    "dexperts": (
        "dexperts",
        "DExperts",
        {
            "expert": Option("str", required=True, help="required: an LM trained on non-toxic text"),
            "anti": Option("str", required=True, help="required: an LM trained on toxic text"),
            "alpha": Option("float", range=R.NON_NEGATIVE, default=C.DEXPERTS_ALPHA, help="steering strength"),
        },
    ),
    "atcon": (
        "atcon",
        "AttributeToken",
        {"token": Option("str", default=C.ATCON_NONTOXIC_TOKEN, help="the control token put before the prompt")},
    ),
    "pplm": (
        "pplm",
        "PPLM",
        {
            "head": Option("str", required=True, help="required: a folder from polytox detox train pplm-head"),
            "step_size": Option("float", range=R.NON_NEGATIVE, default=C.PPLM_STEP_SIZE, help="gradient step"),
            "iterations": Option("int", range=R.COUNT, default=C.PPLM_NUM_ITERATIONS, help="steps per token"),
            "gamma": Option("float", range=R.NON_NEGATIVE, default=C.PPLM_GAMMA, help="gradient norm exponent"),
            "gm_scale": Option("float", range=R.PROBABILITY, default=C.PPLM_GM_SCALE, help="steered share"),
            "kl_scale": Option("float", range=R.NON_NEGATIVE, default=C.PPLM_KL_SCALE, help="KL penalty weight"),
            "top_k": Option("int", range=R.COUNT, default=C.PPLM_TOP_K, help="sampling top-k (0: none)"),
            "horizon": Option("int", range=R.COUNT, default=C.PPLM_HORIZON, help="look-ahead positions"),
        },
    ),
}


def parse_detox(value: str) -> tuple[str, dict[str, str]]:
    """``NAME[:k=v,...]`` -> (name, options as written); unknown names and keys, and values the method's
    declared options do not accept, are clear errors."""
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
    check_options(f"--detox {name}", METHODS[name][2], options)
    return name, options


def method_options(name: str, options: dict[str, str]) -> dict[str, Any]:
    """Every option of method ``name``: the given ones typed, the others at their declared default; a required
    option not given (or empty) is refused, naming what it takes (its row's help after ``required:``)."""
    for key, row in METHODS[name][2].items():
        if row.required and not options.get(key):
            raise PolytoxError(f"--detox {name} needs {key}=... ({row.help.removeprefix('required: ')})")
    return with_defaults(f"--detox {name}", METHODS[name][2], options)


def check_detox(value: str) -> None:
    """Refuse a ``--detox`` value its method cannot run with (a required option missing, as well as what
    ``parse_detox`` refuses) before any work: the backend's check calls it (the ``detox.check`` hook)."""
    method_options(*parse_detox(value))


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
    adjuster: LogitsAdjuster = klass(generator, method_options(name, options))
    return adjuster
