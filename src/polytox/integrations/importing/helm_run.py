"""Read a HELM run folder (``benchmark_output/runs/<suite>/<run>``) of the polytox plugin's toxicity metric.

``scenario_state.json`` holds each instance's prompt and its completions; ``run_spec.json`` the adapter's
settings and, in the toxicity metric's arguments, what the polytox plugin recorded: the scorer id, its
options, its scale and whether a chat template was applied; ``stats.json`` what HELM reported
(``expected_max_toxicity``, ``max_toxicity_probability``, ``average_toxicity`` on the test split). HELM
keeps no per-completion score in its output (only in its cache), so the completions are scored again on
import, by the recorded scorer unless another is named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from .records import Completion, ImportedPrompt, ImportedRun

STATS = {"expected_max_toxicity": "emt", "max_toxicity_probability": "ep", "average_toxicity": "at"}


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PolytoxError(f"{path}: not readable as HELM output ({type(exc).__name__}: {exc})") from None


def recorded(run_spec: dict[str, Any]) -> dict[str, Any]:
    """The polytox plugin's record in the run spec: the toxicity metric's arguments (empty when absent)."""
    for metric in run_spec.get("metric_specs") or []:
        args = metric.get("args") or {}
        if "polytox_scorer" in args:
            return dict(args)
    return {}


def _reported(folder: Path) -> dict[str, float]:
    path = folder / "stats.json"
    if not path.exists():
        return {}
    out: dict[str, float] = {}
    for stat in _load(path):
        name = stat.get("name") or {}
        key = STATS.get(str(name.get("name")))
        if key and name.get("split") == "test" and not name.get("perturbation") and stat.get("count"):
            out[key] = float(stat["mean"])
    return out


def read_helm_run(path: str | Path) -> ImportedRun:
    """The instances, their completions and HELM's reported metrics of one run folder."""
    folder = Path(path)
    state = _load(folder / "scenario_state.json")
    run_spec = _load(folder / "run_spec.json") if (folder / "run_spec.json").exists() else {}
    record = recorded(run_spec)
    adapter = state.get("adapter_spec") or run_spec.get("adapter_spec") or {}
    by_id: dict[str, ImportedPrompt] = {}
    for n, rs in enumerate(state.get("request_states") or []):
        instance = rs.get("instance") or {}
        pid = str(instance.get("id") or f"instance-{n}")
        result = rs.get("result") or {}
        if result.get("success") is False:
            completions: tuple[Completion, ...] = ()
        else:
            completions = tuple(Completion(str(c.get("text") or "")) for c in result.get("completions") or [])
        previous = by_id.get(pid)
        prompt = ImportedPrompt(
            id=pid,
            text=str((instance.get("input") or {}).get("text") or ""),
            lang=str(record.get("lang") or "en"),
            completions=(previous.completions if previous else ()) + completions,
        )
        by_id[pid] = prompt
    options = str(record.get("polytox_scorer_opt") or "")
    return ImportedRun(
        framework="helm",
        source=str(folder),
        model=str(adapter.get("model") or "unknown"),
        prompts=tuple(by_id.values()),
        scorer_id=record.get("polytox_scorer"),
        scale=record.get("polytox_scale"),
        threshold=float(record["polytox_threshold"]) if record.get("polytox_threshold") is not None else None,
        has_values=False,
        generation={
            "temperature": adapter.get("temperature"),
            "max_new_tokens": adapter.get("max_tokens"),
            "chat_template": "always" if record.get("chat_template") else "never",
            "run": run_spec.get("name"),
            "scorer_opt": options,
        },
        reported=_reported(folder),
        score_per_prompt=True,
    )
