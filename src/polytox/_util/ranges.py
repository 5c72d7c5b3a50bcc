"""Allowed ranges of numeric settings, shared by command-line flags (``cli.checks``) and YAML specs.

One ``Range`` says which values a number may take and how to say so in an error message
(``must be in [0, 1], got 2``); the named ranges below cover most settings (a probability, a count, a
port), so the same setting is checked the same way wherever it is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import PolytoxError


@dataclass(frozen=True)
class Range:
    """``lo``/``hi`` bounds (None: unbounded), each closed unless ``*_open``; ``integer``: whole numbers."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def describe(self) -> str:
        def num(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else str(x)

        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{num(self.lo)}, {num(self.hi)}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {num(self.lo)}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {num(self.hi)}"
        return "a finite number"

    def contains(self, value: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return not (self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi))

    def problem(self, value: float) -> str | None:
        """None when ``value`` is allowed, else ``must be ..., got VALUE``."""
        return None if self.contains(value) else f"must be {self.describe()}, got {value!r}"


PROBABILITY = Range(0, 1)  # thresholds, shares
SHARE_OPEN = Range(0, 1, lo_open=True)  # a share that must keep something
COUNT = Range(0, integer=True)  # 0 allowed (often: none / automatic)
AT_LEAST_ONE = Range(1, integer=True)
NON_NEGATIVE = Range(0)
POSITIVE = Range(0, lo_open=True)
PORT = Range(1, 65535, integer=True)
SEED = Range(0, 2**63 - 1, integer=True)
# K continuations per prompt: RTP draws 25, PTP 10; a K past this is a typo that would run until killed
SAMPLES = Range(1, 10_000, integer=True)
# bootstrap resamples: RTP draws 1,000 (polytox's default); each resample is a pass over the prompts and a
# float per statistic kept, so past 100x the default a typo (2e9) would exhaust memory or run for days
RESAMPLES = Range(0, 100_000, integer=True)
RESAMPLES_AT_LEAST_ONE = Range(1, 100_000, integer=True)  # where the resamples' mean is the result itself


def check_range(name: str, value: float, rule: Range) -> None:
    """Refuse ``value`` outside ``rule`` before any work: ``PolytoxError('NAME must be ..., got VALUE')``, for
    the Python keywords that no flag or YAML check has seen."""
    problem = rule.problem(value)
    if problem:
        raise PolytoxError(f"{name} {problem}")
