"""Read lm-evaluation-harness ``--log_samples`` output of a polytox task (``realtoxicityprompts_polytox*``,
``ptp_polytox_<lang>`` or a task of your own with the ``ScoreGenerations`` filter).

lm-eval writes, under ``--output_path``, ``results_<time>.json`` (metrics and the run's configuration)
and one ``samples_<task>_<time>.jsonl`` per task: a line per document with its responses and, in
``filtered_resps``, what polytox's filter recorded: each sample's text, value or error, the scorer id, its
scale and the threshold. The source is one samples file, or a folder holding one (searched recursively).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from .records import Completion, ImportedPrompt, ImportedRun


def samples_file(path: Path) -> Path:
    """The samples JSONL at ``path`` or the only one under it."""
    if path.is_file():
        return path
    found = sorted(path.rglob("samples_*.jsonl"))
    if not found:
        raise PolytoxError(f"{path}: no lm-eval samples file (samples_*.jsonl); run lm_eval with --log_samples")
    if len(found) > 1:
        listed = ", ".join(str(f.relative_to(path)) for f in found[:5])
        raise PolytoxError(f"{path} holds {len(found)} lm-eval samples files ({listed}); name one of them")
    return found[0]


def _polytox_record(value: Any) -> Mapping[str, Any] | None:
    """The filter's per-document record in ``filtered_resps``: lm-eval logs it in a list, as the ``str()`` of
    the dict (a Python literal, whose floats read back exactly)."""
    if isinstance(value, str) and value.startswith("{") and "'samples'" in value:
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    if isinstance(value, Mapping) and "samples" in value:
        return value
    if isinstance(value, list):
        for item in value:
            found = _polytox_record(item)
            if found is not None:
                return found
    return None


def polytox_record(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The polytox record of one line of a samples file (None: the line has none)."""
    return _polytox_record(row.get("filtered_resps"))


def _prompt(doc: Mapping[str, Any], arguments: Any) -> tuple[str, float | None]:
    prompt = doc.get("prompt")
    if isinstance(prompt, Mapping) and isinstance(prompt.get("text"), str):
        return str(prompt["text"]), prompt.get("toxicity")
    if isinstance(doc.get("text"), str):
        return str(doc["text"]), doc.get("prompt_toxicity")
    try:  # the context lm-eval sent: arguments[0][0] (or {"arg_0": ...})
        first = arguments[0] if isinstance(arguments, list) else next(iter(arguments.values()))
        return str(first[0] if isinstance(first, list) else first.get("arg_0")), None
    except (IndexError, KeyError, StopIteration, AttributeError, TypeError):
        return "", None


def _results(folder: Path, task: str) -> tuple[dict[str, float], dict[str, Any]]:
    """What lm-eval printed for ``task`` (emt, ep, at) and its run configuration, from the newest results file."""
    for path in sorted(folder.glob("results_*.json"), reverse=True):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        block = (data.get("results") or {}).get(task) or {}
        reported = {
            k.split(",", 1)[0]: float(v)
            for k, v in block.items()
            if k.split(",", 1)[0] in ("emt", "ep", "at") and isinstance(v, int | float)
        }
        return reported, {"config": data.get("config") or {}, "task": (data.get("configs") or {}).get(task) or {}}
    return {}, {}


def read_lm_eval_samples(path: str | Path) -> ImportedRun:
    """The documents, their K responses and the values polytox's filter recorded, with lm-eval's metrics."""
    source = samples_file(Path(path))
    prompts: list[ImportedPrompt] = []
    scorer_id = scale = None
    threshold: float | None = None
    with source.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise PolytoxError(f"{source}:{n}: not JSON ({exc})") from None
            record = polytox_record(row)
            if record is None:
                raise PolytoxError(
                    f"{source}:{n}: no polytox record in filtered_resps (a task without polytox's ScoreGenerations "
                    "filter, or a samples file of another filter)"
                )
            doc = row.get("doc") or {}
            text, toxicity = _prompt(doc, row.get("arguments"))
            completions = tuple(
                Completion(str(s.get("text") or ""), s.get("toxicity"), s.get("error")) for s in record["samples"]
            )
            prompts.append(
                ImportedPrompt(
                    id=str(doc.get("id") or f"doc-{row.get('doc_id', n - 1)}"),
                    text=text,
                    lang=str(doc.get("lang") or "en"),
                    toxicity=float(toxicity) if isinstance(toxicity, int | float) else None,
                    completions=completions,
                )
            )
            scorer_id, scale = record.get("scorer"), record.get("scale")
            threshold = float(record["threshold"]) if record.get("threshold") is not None else threshold
    task = source.stem.removeprefix("samples_").rsplit("_", 1)[0]
    reported, config = _results(source.parent, task)
    model_args = str((config.get("config") or {}).get("model_args") or "")
    model = next((a.split("=", 1)[1] for a in model_args.split(",") if a.startswith("pretrained=")), "unknown")
    kwargs = (config.get("task") or {}).get("generation_kwargs") or {}
    generation = {
        "temperature": kwargs.get("temperature"),
        "top_p": kwargs.get("top_p"),
        "max_new_tokens": kwargs.get("max_gen_toks"),
        "task": task,
    }
    return ImportedRun(
        framework="lm_eval",
        source=str(source),
        model=Path(model).name if "/" in model and Path(model).exists() else model,
        prompts=tuple(prompts),
        scorer_id=scorer_id,
        scale=scale,
        threshold=threshold,
        has_values=True,
        generation=generation,
        reported=reported,
    )
