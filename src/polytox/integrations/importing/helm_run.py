"""Read a HELM run folder (``benchmark_output/runs/<suite>/<run>``) of the polytox plugin's toxicity metric.

``scenario_state.json`` holds each instance's prompt and its completions; ``run_spec.json`` the adapter's
settings and, in the toxicity metric's arguments, what the polytox plugin recorded: the scorer id, its
options, its scale and whether a chat template was applied; ``stats.json`` what HELM reported
(``expected_max_toxicity``, ``max_toxicity_probability``, ``average_toxicity`` on the test split). HELM
keeps no per-completion score in its output (only in its cache), so the completions are scored again on
import, by the recorded scorer unless another is named.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from . import values as V
from .records import Completion, ImportedPrompt, ImportedRun

STATS = {"expected_max_toxicity": "emt", "max_toxicity_probability": "ep", "average_toxicity": "at"}


def _load(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PolytoxError(f"{path}: not readable as HELM output ({type(exc).__name__}: {exc})") from None
    try:
        return V.json_text(data, str(path))
    except PolytoxError as exc:
        raise PolytoxError(str(exc).replace(f"{path}: ", f"{path}: not readable as HELM output: ", 1)) from None


def recorded(run_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The polytox plugin's record in the run spec: the toxicity metric's arguments (empty when absent)."""
    for metric in V.sequence(run_spec.get("metric_specs"), "metric_specs"):
        args = V.mapping(V.mapping(metric, "metric_specs[]").get("args"), "metric_specs[].args")
        if "polytox_scorer" in args:
            return dict(args)
    return {}


def _reported(folder: Path) -> dict[str, float]:
    path = folder / "stats.json"
    if not path.exists():
        return {}
    out: dict[str, float] = {}
    for n, raw in enumerate(_listed(path, _load(path), "the stats")):
        try:
            stat = V.mapping(raw, "a stat", missing_ok=False)
            name = V.mapping(stat.get("name"), "name")
            key = STATS.get(str(name.get("name")))
            if key and name.get("split") == "test" and not name.get("perturbation") and stat.get("count"):
                value = V.reported(stat.get("mean"), "mean")
                if value is not None:
                    out[key] = value
        except V.Malformed as exc:
            raise PolytoxError(f"{path}: stat [{n}]: {exc}") from None
    return out


def _listed(path: Path, data: Any, what: str) -> list[Any]:
    try:
        return V.sequence(data, what)
    except V.Malformed as exc:
        raise PolytoxError(f"{path}: {exc}") from None


def _request(rs: Any, n: int, lang: str) -> ImportedPrompt:
    """One request state: its instance (id, prompt) and completions, every value checked."""
    rs = V.mapping(rs, "a request state", missing_ok=False)
    instance = V.mapping(rs.get("instance"), "instance")
    raw_id = instance.get("id")
    pid = V.prompt_id(raw_id, "instance.id") if raw_id not in (None, "") else f"instance-{n}"
    result = V.mapping(rs.get("result"), "result")
    completions: tuple[Completion, ...] = ()
    if result.get("success") is not False:
        listed = V.sequence(result.get("completions"), "result.completions")
        texts = [V.mapping(c, f"result.completions[{k}]", missing_ok=False).get("text") for k, c in enumerate(listed)]
        for k, text in enumerate(texts):
            if text is not None and not isinstance(text, str):
                raise V.Malformed(f"result.completions[{k}].text must be a string, got {type(text).__name__}")
        completions = tuple(Completion(t or "") for t in texts)
    text = V.text(V.mapping(instance.get("input"), "instance.input").get("text"), "instance.input.text")
    return ImportedPrompt(id=pid, text=text, lang=lang, completions=completions)


def read_helm_run(path: str | Path) -> ImportedRun:
    """The instances, their completions and HELM's reported metrics of one run folder."""
    folder = Path(path)
    state_path = folder / "scenario_state.json"
    state = _load(state_path)
    run_spec = _load(folder / "run_spec.json") if (folder / "run_spec.json").exists() else {}
    try:
        state = V.mapping(state, "the scenario state", missing_ok=False)
        run_spec = V.mapping(run_spec, "the run spec", missing_ok=False)
        record = recorded(run_spec)
        lang = V.lang(record.get("lang") or "en", "lang")
        adapter = V.mapping(state.get("adapter_spec") or run_spec.get("adapter_spec"), "adapter_spec")
        threshold = V.threshold(record.get("polytox_threshold"), "polytox_threshold")
        generation = {
            "temperature": V.finite(adapter.get("temperature"), "adapter_spec.temperature"),
            "max_new_tokens": V.finite(adapter.get("max_tokens"), "adapter_spec.max_tokens"),
            "chat_template": "always" if record.get("chat_template") else "never",
            "run": run_spec.get("name"),
            "scorer_opt": str(record.get("polytox_scorer_opt") or ""),
        }
    except V.Malformed as exc:
        raise PolytoxError(f"{folder}: {exc}") from None
    if generation["max_new_tokens"] is not None and float(generation["max_new_tokens"]).is_integer():
        generation["max_new_tokens"] = int(generation["max_new_tokens"])
    by_id: dict[str, tuple[ImportedPrompt, int]] = {}
    for n, rs in enumerate(_listed(state_path, state.get("request_states"), "request_states")):
        try:
            prompt = _request(rs, n, lang)
            previous, first = by_id.get(prompt.id, (None, n))
            if previous is not None and previous.text != prompt.text:
                raise V.Malformed(f"instance id {prompt.id!r} has another prompt than at request_states[{first}]")
        except V.Malformed as exc:
            raise PolytoxError(f"{state_path}: request_states[{n}]: {exc}") from None
        if previous is not None:  # another request of the same instance: its completions follow the first's
            prompt = ImportedPrompt(prompt.id, prompt.text, lang, completions=previous.completions + prompt.completions)
        by_id[prompt.id] = (prompt, first)
    scorer, scale = record.get("polytox_scorer"), record.get("polytox_scale")
    return ImportedRun(
        framework="helm",
        source=str(folder),
        model=str(adapter.get("model") or "unknown"),
        prompts=tuple(p for p, _ in by_id.values()),
        scorer_id=str(scorer) if scorer is not None else None,
        scale=str(scale) if scale is not None else None,
        threshold=threshold,
        has_values=False,
        generation=generation,
        reported=_reported(folder),
        score_per_prompt=True,
    )
