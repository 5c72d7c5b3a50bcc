"""Read an inspect_ai log of polytox's ``toxicity`` scorer (the ``polytox/rtp`` task or a task of your own).

inspect writes ``.eval`` logs (a zip: ``header.json`` with the task, model and results, one
``samples/<id>_epoch_<n>.json`` per sample and epoch) or ``.json`` logs (one document with a ``samples``
list). Both are read with the standard library, so importing needs no inspect install. Each epoch of a
sample is one completion of that prompt; its score is the ``emt`` of the polytox score's value (one epoch's
EMT is its toxicity), NaN meaning a failed score whose reason is the score's ``explanation``.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from .records import Completion, ImportedPrompt, ImportedRun

SCORER_NAME = "toxicity"


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, samples) of a ``.eval`` or ``.json`` log; a zstd-compressed ``.eval`` (inspect's default, which
    the standard library cannot open) is read with inspect_ai where it is installed."""
    try:
        return _read_plain(path)
    except NotImplementedError:  # zipfile: "That compression method is not supported" (zstd)
        return _read_with_inspect(path)


def _read_with_inspect(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise PolytoxError(
            f"{path}: this .eval log is zstd-compressed, which needs inspect_ai to read; import it where inspect_ai "
            "is installed (make integrations-venv), or convert it first: inspect log convert --to json "
            f"--resolve-attachments full --output-dir DIR {path}"
        ) from None
    data = read_eval_log(str(path)).model_dump(mode="json")
    return data, list(data.get("samples") or [])


def _read_plain(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                header = json.loads(z.read("header.json")) if "header.json" in names else {}
                if not header and "_journal/start.json" in names:
                    header = json.loads(z.read("_journal/start.json"))
                samples = [
                    json.loads(z.read(n)) for n in sorted(names) if n.startswith("samples/") and n.endswith(".json")
                ]
                return header, samples
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise PolytoxError(f"{path}: not a readable inspect log ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or "eval" not in data:
        raise PolytoxError(f"{path}: not an inspect log (no 'eval' record)")
    return data, list(data.get("samples") or [])


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages: the user's content
        parts = []
        for m in value:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [c.get("text", "") for c in content if isinstance(c, dict)]
        return "".join(parts)
    return str(value)


def _completion(output: Any) -> str:
    if not isinstance(output, dict):
        return ""
    if isinstance(output.get("completion"), str):
        return str(output["completion"])
    choices = output.get("choices") or []
    if choices:
        content = (choices[0].get("message") or {}).get("content")
        return _input_text([{"content": content}])
    return ""


def _score(sample: dict[str, Any], text: str) -> tuple[Completion, dict[str, Any]]:
    scores = sample.get("scores") or {}
    score = scores.get(SCORER_NAME) or next(iter(scores.values()), None)
    if not isinstance(score, dict) or not isinstance(score.get("value"), dict) or "emt" not in score["value"]:
        raise PolytoxError(
            f"sample {sample.get('id')!r} (epoch {sample.get('epoch')}) has no polytox toxicity score: "
            "the log was not scored by polytox.integrations.inspect.toxicity"
        )
    value = score["value"]["emt"]
    meta = score.get("metadata") or {}
    if value is None or (isinstance(value, float) and math.isnan(value)) or isinstance(value, str):
        error = score.get("explanation") or score.get("reason") or "scoring_failed"
        return Completion(text, None, str(error)), meta
    return Completion(text, float(value), None), meta


def read_inspect_log(path: str | Path) -> ImportedRun:
    """The prompts, completions (one per epoch) and recorded scores of an inspect log."""
    path = Path(path)
    header, samples = _read(path)
    if not samples:
        raise PolytoxError(f"{path}: the inspect log holds no samples (was the eval run with --no-log-samples?)")
    evaluation = header.get("eval") or {}
    by_id: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    meta: dict[str, Any] = {}
    for sample in sorted(samples, key=lambda s: (str(s.get("id")), int(s.get("epoch") or 1))):
        pid = str(sample.get("id"))
        if pid not in by_id:
            order.append(pid)
            sm = sample.get("metadata") or {}
            by_id[pid] = {
                "text": _input_text(sample.get("input")),
                "lang": str(sm.get("lang") or "en"),
                "toxicity": sm.get("prompt_toxicity"),
                "completions": [],
            }
        completion, meta = _score(sample, _completion(sample.get("output")))
        by_id[pid]["completions"].append(completion)
    prompts = tuple(
        ImportedPrompt(
            id=pid,
            text=by_id[pid]["text"],
            lang=by_id[pid]["lang"],
            toxicity=by_id[pid]["toxicity"],
            completions=tuple(by_id[pid]["completions"]),
        )
        for pid in order
    )
    config = (header.get("plan") or {}).get("config") or {}
    task_args = evaluation.get("task_args") or {}
    generation = {
        "temperature": config.get("temperature"),
        "top_p": config.get("top_p"),
        "max_new_tokens": config.get("max_tokens"),
        "task": evaluation.get("task"),
        "task_args": task_args,
    }
    reported: dict[str, float] = {}
    for block in (header.get("results") or {}).get("scores") or []:
        name = block.get("name")
        metrics = block.get("metrics") or {}
        if name in ("emt", "ep", "at") and metrics:
            reported[str(name)] = float(next(iter(metrics.values()))["value"])
    model_args = evaluation.get("model_args") or {}
    model = str(model_args.get("model_path") or evaluation.get("model") or "unknown")
    return ImportedRun(
        framework="inspect_ai",
        source=str(path),
        model=Path(model).name if model_args.get("model_path") else model,
        prompts=prompts,
        scorer_id=meta.get("scorer"),
        scale=meta.get("scale"),
        threshold=float(meta["threshold"]) if meta.get("threshold") is not None else None,
        has_values=True,
        generation=generation,
        reported=reported,
    )
