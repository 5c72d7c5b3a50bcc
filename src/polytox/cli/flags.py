"""The flags several commands take, each declared once: ``--threshold``, ``--comparison``, ``--n-bootstrap``,
``--seed``, ``--lang``, ``--scorer``, ``--scorer-opt``, ``--attribute`` and ``--scale``.

A flag's name, type, range or choices, default and help come from one row (``settings.Setting``): the run
settings' rows (``settings.TABLE``, what ``polytox eval`` takes), the metrics settings' rows
(``metrics.settings``, what ``polytox metrics`` and ``Run.metrics(...)`` take), or the rows below where a
flag of the same name means something else in some commands (``--seed`` of a sampler, ``--lang`` of one
corpus). ``add`` is the only place these option strings are given to argparse (a test walks every
subcommand and the sources); numbers are range-checked by their row's range when parsed. ``argument``, which
``add`` calls, is the one function that turns a row into an argparse flag; ``polytox eval`` builds all its
setting flags with it too.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import constants as C
from .. import settings as S
from .._util.ranges import RESAMPLES_AT_LEAST_ONE
from .._util.ranges import SEED as SEED_RANGE
from ..metrics import settings as M
from .checks import number

# The option strings declared here only.
SHARED_OPTIONS = (
    "--threshold",
    "--comparison",
    "--n-bootstrap",
    "--seed",
    "--lang",
    "--scorer",
    "--scorer-opt",
    "--attribute",
    "--scale",
)


def _row(key: str, kind: str, default: Any, help: str, **extra: Any) -> S.Setting:
    return S.Setting(key=key, section="", kind=kind, default=default, help=help, hashed=False, **extra)


# fmt: off
# The seed of a command's own sampling or training (build, calibrate, corpus overlap, detox corpus/train).
SEED = _row("seed", "int", 0, "random seed (default 0)", range=SEED_RANGE)
# unprompted: the curve is the resamples' mean, so none is no curve.
CURVE_RESAMPLES = _row("n_bootstrap", "int", C.BOOTSTRAP_RESAMPLES, "resamples per n (RTP: 1,000)",
                       range=RESAMPLES_AT_LEAST_ONE)
TRAINING_LANGS = _row("lang", "langs", (), "RTP-LX languages (default: PTP's 17)")
CORPUS_LANG = _row("lang", "str", None, "language of the whole corpus (skips detection)")
DETOX_CORPUS_LANG = _row("lang", "str", "en", "keep records of this language ('' for all)")
AUC_BY_LANG = _row("lang", "bool", False, "also print per-language AUC against human ratings")
BUILD_SCORER = _row("scorer", "str", "svm", "scorer name (default: svm, English only)")
IMPORT_SCORER = _row("scorer", "str", None, "also score the completions with this scorer (needed for HELM)")
SCORED_ATTRIBUTE = _row("attribute", "str", "toxicity", "which attribute of the scores (default toxicity)")
# fmt: on


def argument(p: Any, row: S.Setting, *, dest: str | None = None, unset: bool = False) -> argparse.Action:
    """``row`` as a flag of parser (or group) ``p``: the one place a row of the schema becomes an argparse
    flag (``polytox eval``'s flags, one per row of ``settings.TABLE``, and the shared flags of ``add``).

    The flag is ``--key`` (and the row's short form), with the row's help, metavar and choices; a number is
    parsed and range-checked by the row's range (``checks.number``), a bool is a switch, a language list or
    ``KEY=VALUE`` options may be repeated. ``unset``: default None, for commands where a config file may give
    the value (a flag given wins; one not given must not hide the file's)."""
    names = [row.option, *([row.short] if row.short else [])]
    extra: dict[str, Any] = {"help": row.help.replace("%", "%%"), "default": None if unset else row.default}
    if dest:
        extra["dest"] = dest
    if row.metavar:
        extra["metavar"] = row.metavar
    if row.kind in ("int", "float"):
        kind = int if row.kind == "int" else float
        extra["type"] = number(kind, row.range) if row.range is not None else kind
    elif row.kind == "bool":
        extra["action"] = "store_true"
    elif row.kind in ("langs", "options"):
        extra.update(action="append", default=None)
    if row.choices:
        extra["choices"] = list(row.choices)
    return p.add_argument(*names, **extra)  # type: ignore[no-any-return]


def add(p: Any, row: S.Setting, *, dest: str | None = None, unset: bool = False) -> argparse.Action:
    """``row`` as a shared flag (one of ``SHARED_OPTIONS``) of parser (or group) ``p`` (``argument``)."""
    if row.option not in SHARED_OPTIONS:
        raise ValueError(f"{row.option} is not a shared flag")
    return argument(p, row, dest=dest, unset=unset)


def add_threshold(p: Any) -> None:
    """``--threshold``: the toxic threshold (the run setting's row)."""
    add(p, S.BY_KEY["threshold"])


def add_comparison(p: Any) -> None:
    """``--comparison``: ``>=`` or ``>`` (the run setting's row)."""
    add(p, S.BY_KEY["comparison"])


def add_n_bootstrap(p: Any, row: S.Setting | None = None) -> None:
    """``--n-bootstrap``: the resamples of the confidence intervals (the run setting's row by default)."""
    add(p, row or S.BY_KEY["n_bootstrap"])


def add_seed(p: Any, row: S.Setting = SEED) -> None:
    """``--seed``: a command's own random seed (``SEED``), or the bootstrap seed (``metrics.settings``)."""
    add(p, row)


def add_lang(p: Any, row: S.Setting | None = None, dest: str | None = None) -> None:
    """``--lang``: only these languages (the run setting's row), or one of the rows above."""
    add(p, row or S.BY_KEY["lang"], dest=dest)


def add_scorer_flags(p: Any, scorer: S.Setting | None = None, unset: bool = False) -> None:
    """``--scorer`` (the run setting's row, or ``BUILD_SCORER`` / ``IMPORT_SCORER``) and ``--scorer-opt``."""
    add(p, scorer or S.BY_KEY["scorer"], unset=unset)
    add(p, S.BY_KEY["scorer_opt"])


def add_stored_scorer(p: Any) -> None:
    """``--scorer`` of a stored run: which of its scorers is read (``metrics``, ``leaderboard`` ...)."""
    add(p, M.STORED_SCORER)


def add_stored_attribute(p: Any) -> None:
    """``--attribute`` of a stored run: which of its attributes is read."""
    add(p, M.STORED_ATTRIBUTE)


def add_scale(p: Any) -> None:
    """``--scale``: re-read stored raw scores on another scale."""
    add(p, M.SCALE)


def add_metrics_flags(p: Any) -> None:
    """Every metrics setting (``metrics.settings``) as ``polytox metrics`` takes them."""
    add_stored_scorer(p)
    add_stored_attribute(p)
    add_threshold(p)
    add_comparison(p)
    add_n_bootstrap(p)
    add_seed(p, M.BOOTSTRAP_SEED)
    add_scale(p)
