"""The report's content as JSON: the same numbers as the HTML, machine-readable (no plots)."""

from __future__ import annotations

from typing import Any

from .build import Report


def report_dict(report: Report) -> dict[str, Any]:
    return {
        "title": report.title,
        "created_at": report.created_at,
        "polytox_version": report.version,
        "settings": report.settings,
        "notes": report.notes,
        "leaderboard": report.leaderboard.to_dict(),
        "analyses": [
            {
                "name": s.name,
                "description": s.description,
                "error": s.error,
                **(s.result.to_dict() if s.result is not None else {}),
            }
            for s in report.sections
        ],
        "samples": report.samples.to_dict(),
        "corpus": [c.stats for c in report.corpus],
        "runs": [
            {
                "run_id": r.run_id,
                "path": str(r.path),
                "model": r.model,
                "prompt_set": r.prompt_set,
                "scorers": list(r.scorer_ids),
                "status": r.status,
                "meta": r.meta.to_dict(),
                "manifest": r.manifest,
            }
            for r in report.runs
        ],
    }
