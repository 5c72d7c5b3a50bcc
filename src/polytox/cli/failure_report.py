"""The end of ``polytox eval``: what failed (by error kind, one example each), how to retry it, and the
exit code that ``--max-failed`` sets (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import settings as S
from ..errors import EXIT_OK, EXIT_TOO_MANY_FAILED, PolytoxError
from ..metrics.failures import FailureSummary

DEFAULT_MAX_FAILED = S.BY_KEY["max_failed"].default  # "0.5%": the row of ``--max-failed``


@dataclass(frozen=True)
class MaxFailed:
    """The failures a run may have and still exit 0: a share of the samples or a count."""

    text: str
    share: float | None = None
    count: int | None = None

    def exceeded(self, summary: FailureSummary) -> bool:
        if self.count is not None:
            return summary.n_failed > self.count
        return summary.n_failed > 0 and summary.share > (self.share or 0.0)


def parse_max_failed(text: str) -> MaxFailed:
    """``0.5%`` (a percentage of the samples), ``0.005`` (a share, below 1) or ``10`` (a count)."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1])
            if 0 <= value <= 100:
                return MaxFailed(raw, share=value / 100)
        elif re.fullmatch(r"\d+", raw):
            return MaxFailed(raw, count=int(raw))
        else:
            value = float(raw)
            if 0 <= value < 1:
                return MaxFailed(raw, share=value)
    except ValueError:
        pass
    raise PolytoxError(
        f"--max-failed {text!r}: give a percentage (0.5%), a share below 1 (0.005) or a count of samples (10)"
    )


def failure_lines(summary: FailureSummary, max_failed: MaxFailed, retry: str) -> list[str]:
    """The summary printed after the metrics table; no lines when nothing failed."""
    if not summary.n_failed:
        return []
    verdict = (
        f"more than --max-failed {max_failed.text} (exit code {EXIT_TOO_MANY_FAILED})"
        if max_failed.exceeded(summary)
        else f"within --max-failed {max_failed.text}"
    )
    lines = [
        f"failed: {summary.n_failed} of {summary.n_samples} samples ({100 * summary.share:.2f}%): "
        f"{summary.n_failed_generations} generation(s), {summary.n_failed_scores} score(s); {verdict}"
    ]
    width = max(len(k.kind) for k in summary.kinds)
    for k in summary.kinds:
        lines.append(f"  {k.stage:<10} {k.kind:<{width}} {k.count:>7}  e.g. {' '.join(k.example.split())}")
    if summary.n_unscorable:
        lines.append(
            f"  (not failures: {summary.n_unscorable} empty or invalid continuation(s), missing scores in the metrics)"
        )
    lines.append(f"retry the failed samples (original seeds; rescored; metrics recomputed): {retry}")
    return lines


def retry_line(retry: dict[str, Any]) -> str:
    """What ``--retry-failed`` did, in one line."""
    if not retry["shards_repaired"]:
        return "--retry-failed: no failed sample to retry"
    return (
        f"retried {retry['generations_retried']} failed generation(s): {retry['generations_recovered']} "
        f"recovered; {retry['scores_retried']} failed score(s): {retry['scores_recovered']} recovered "
        f"({retry['shards_repaired']} shard(s) rewritten)"
    )


def exit_code(summary: FailureSummary, max_failed: MaxFailed) -> int:
    return EXIT_TOO_MANY_FAILED if max_failed.exceeded(summary) else EXIT_OK
