"""The settings of a metrics computation: one row each, read by ``polytox metrics`` and ``Run.metrics(...)``.

``polytox metrics RUN --threshold 0.3`` and ``open_run(RUN).metrics(threshold=0.3)`` compute the same
thing; their flags and keywords are the rows below (``settings.Setting``), so a name, its default, its
range or choices and its help are written once. The threshold, comparison and resamples are the run
settings' own rows (``settings.TABLE``: what ``polytox eval`` computes); the others say what to read of a
stored run. ``checked`` converts and checks keyword values by the rows, in the words a flag's refusal
uses (the flag's types come from the same rows: ``cli.flags``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._util.ranges import SEED
from ..errors import BadValueError
from ..settings import BY_KEY as RUN_SETTINGS
from ..settings import Setting

SCALE = Setting(
    key="scale",
    section="metrics",
    kind="str",
    default=None,
    help="re-read polytox-ml / default scores on another scale from their stored raw values "
    "(perspective-2020, perspective-2022, raters, head, head:web; see 'polytox scorers')",
    hashed=False,
)
STORED_SCORER = Setting(
    key="scorer",
    section="metrics",
    kind="str",
    default=None,
    help="stored scorer to use: full id, directory name or bare name such as 'svm' (default: each run's own)",
    hashed=False,
)
BOOTSTRAP_SEED = Setting(
    key="seed",
    section="metrics",
    kind="int",
    default=None,
    help="bootstrap seed (default: a run's own seed, as in its metrics.json; 0 for a file)",
    hashed=False,
    range=SEED,
)
STORED_ATTRIBUTE = Setting(
    key="attribute",
    section="metrics",
    kind="str",
    default="toxicity",
    help="score attribute: severe_toxicity, insult, ... of runs scored with attributes=rtp (default: toxicity)",
    hashed=False,
)

# In the order of ``Run.metrics``'s keywords.
METRICS_SETTINGS: tuple[Setting, ...] = (
    SCALE,
    RUN_SETTINGS["threshold"],
    RUN_SETTINGS["comparison"],
    RUN_SETTINGS["n_bootstrap"],
    STORED_SCORER,
    BOOTSTRAP_SEED,
    STORED_ATTRIBUTE,
)
BY_KEY: dict[str, Setting] = {s.key: s for s in METRICS_SETTINGS}


def default(key: str) -> Any:
    """The default of a metrics setting (typed Any so a keyword's annotation reads as given)."""
    return BY_KEY[key].default


def checked(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (by key) converted by their rows and checked: ``BadValueError`` with the row's line
    (``threshold must be in [0, 1], got 2.0``) for the first bad one, in row order."""
    out = dict(values)
    for row in METRICS_SETTINGS:
        if values.get(row.key) is None:
            continue
        out[row.key] = row.convert(values[row.key])
        if problem := row.problem(out[row.key]):
            raise BadValueError(problem, row.key)
    return out
