"""Read an inspect_ai log of polytox's ``toxicity`` scorer (the ``polytox/rtp`` task or a task of your own).

inspect writes ``.eval`` logs (a zip: ``header.json`` with the task, model and results, one
``samples/<id>_epoch_<n>.json`` per sample and epoch) or ``.json`` logs (one document with a ``samples``
list). Both are read with the standard library, so importing needs no inspect install. Each epoch of a
sample is one completion of that prompt; its score is the ``emt`` of the polytox score's value (one epoch's
EMT is its toxicity), NaN meaning a failed score whose reason is the score's ``explanation``. Every
value is checked (``values``): a bad one is one error naming the file and the sample
(``LOG:samples/3_epoch_1.json`` in a ``.eval``, ``LOG: samples[2]`` in a ``.json``).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from . import values as V
from .records import Completion, ImportedPrompt, ImportedRun

SCORER_NAME = "toxicity"


Samples = list[tuple[str, Any]]  # (where: the file and the sample's place in it, the sample as read)


def _read(path: Path) -> tuple[Any, Samples]:
    """(header, samples) of a ``.eval`` or ``.json`` log; a zstd-compressed ``.eval`` (inspect's default, which
    the standard library cannot open) is read with inspect_ai where it is installed."""
    try:
        return _read_plain(path)
    except NotImplementedError:  # zipfile: "That compression method is not supported" (zstd)
        return _read_with_inspect(path)


def _read_with_inspect(path: Path) -> tuple[Any, Samples]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise PolytoxError(
            f"{path}: this .eval log is zstd-compressed, which needs inspect_ai to read; import it where inspect_ai "
            "is installed (make integrations-venv), or convert it first: inspect log convert --to json "
            f"--resolve-attachments full --output-dir DIR {path}"
        ) from None
    data = read_eval_log(str(path)).model_dump(mode="json")
    return data, [(f"{path}: samples[{i}]", s) for i, s in enumerate(data.get("samples") or [])]


def _member(z: zipfile.ZipFile, path: Path, name: str) -> Any:
    """One JSON member of a ``.eval`` zip, read with the nesting limit."""
    return V.json_text(z.read(name), f"{path}:{name}")


def _read_plain(path: Path) -> tuple[Any, Samples]:
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                header = _member(z, path, "header.json") if "header.json" in names else {}
                if not header and "_journal/start.json" in names:
                    header = _member(z, path, "_journal/start.json")
                samples = [
                    (f"{path}:{n}", _member(z, path, n))
                    for n in sorted(names)
                    if n.startswith("samples/") and n.endswith(".json")
                ]
                return header, samples
        data = V.json_text(path.read_bytes(), str(path))
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise PolytoxError(f"{path}: not a readable inspect log ({type(exc).__name__}: {exc})") from None
    except PolytoxError as exc:
        raise PolytoxError(f"{str(exc).replace(f'{path}: ', f'{path}: not a readable inspect log: ', 1)}") from None
    if not isinstance(data, dict) or "eval" not in data:
        raise PolytoxError(f"{path}: not an inspect log (no 'eval' record)")
    try:
        listed = V.sequence(data.get("samples"), "samples")
    except V.Malformed as exc:
        raise PolytoxError(f"{path}: {exc}") from None
    return data, [(f"{path}: samples[{i}]", s) for i, s in enumerate(listed)]


def _input_text(value: Any) -> Any:
    """The prompt of a sample's ``input``: a string, or the user's content of chat messages (None: neither,
    which the text check refuses)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # chat messages: the user's content
        parts = []
        for m in value:
            content = m.get("content") if isinstance(m, Mapping) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [str(c.get("text") or "") for c in content if isinstance(c, Mapping)]
        return "".join(parts)
    return None


def _completion(output: Any) -> str:
    if not isinstance(output, Mapping):
        return ""
    if isinstance(output.get("completion"), str):
        return str(output["completion"])
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        return str(_input_text([{"content": content}]) or "")
    return ""


def _score(sample: Mapping[str, Any], text: str) -> tuple[Completion, Mapping[str, Any]]:
    scores = V.mapping(sample.get("scores"), "scores")
    score = scores.get(SCORER_NAME) or next(iter(scores.values()), None)
    if not isinstance(score, Mapping) or not isinstance(score.get("value"), Mapping) or "emt" not in score["value"]:
        raise V.Malformed("no polytox toxicity score: the log was not scored by polytox.integrations.inspect.toxicity")
    value = score["value"]["emt"]
    meta = V.mapping(score.get("metadata"), "scores.metadata")
    if value is None or (isinstance(value, float) and math.isnan(value)) or isinstance(value, str):
        error = score.get("explanation") or score.get("reason") or "scoring_failed"
        return Completion(text, None, str(error)), meta
    return Completion(text, V.toxicity(value, "scores.value.emt"), None), meta


def _sample(raw: Any) -> tuple[str, int, dict[str, Any], Completion, Mapping[str, Any]]:
    """(id, epoch, the prompt's fields, this epoch's completion, the score's metadata) of one sample, checked."""
    sample = V.mapping(raw, "a sample", missing_ok=False)
    pid = V.prompt_id(sample.get("id"), "id")
    epoch = V.count(sample.get("epoch"), "epoch")
    sm = V.mapping(sample.get("metadata"), "metadata")
    prompt = {
        "text": V.text(_input_text(sample.get("input")), "input"),
        "lang": V.lang(sm.get("lang") or "en", "metadata.lang"),
        "toxicity": V.toxicity(sm.get("prompt_toxicity"), "metadata.prompt_toxicity"),
    }
    completion, meta = _score(sample, _completion(sample.get("output")))
    return pid, epoch, prompt, completion, meta


def _prompts(samples: Samples) -> tuple[tuple[ImportedPrompt, ...], Mapping[str, Any]]:
    """The prompts (one per sample id, its epochs as completions in epoch order) and the last score's metadata."""
    read: list[tuple[str, int, dict[str, Any], Completion]] = []
    meta: Mapping[str, Any] = {}
    seen: dict[tuple[str, int], str] = {}
    for where, raw in samples:
        try:
            pid, epoch, prompt, completion, meta = _sample(raw)
            if (pid, epoch) in seen:
                raise V.Malformed(f"sample {pid!r} epoch {epoch} appears twice (first at {seen[pid, epoch]})")
        except V.Malformed as exc:
            raise PolytoxError(f"{where}: {exc}") from None
        seen[pid, epoch] = where
        read.append((pid, epoch, prompt, completion))
    by_id: dict[str, dict[str, Any]] = {}
    for pid, _, prompt, completion in sorted(read, key=lambda r: (r[0], r[1])):
        by_id.setdefault(pid, {**prompt, "completions": []})["completions"].append(completion)
    prompts = tuple(
        ImportedPrompt(
            id=pid, text=p["text"], lang=p["lang"], toxicity=p["toxicity"], completions=tuple(p["completions"])
        )
        for pid, p in by_id.items()
    )
    return prompts, meta


def _header(path: Path, header: Any) -> tuple[dict[str, Any], dict[str, float], str, Mapping[str, Any]]:
    """(generation settings, the metrics inspect reported, the model, the eval record) of the log's header."""
    try:
        header = V.mapping(header, "the header", missing_ok=False)
        evaluation = V.mapping(header.get("eval"), "eval")
        config = V.mapping(V.mapping(header.get("plan"), "plan").get("config"), "plan.config")
        max_tokens = V.finite(config.get("max_tokens"), "plan.config.max_tokens")
        generation: dict[str, Any] = {
            "temperature": V.finite(config.get("temperature"), "plan.config.temperature"),
            "top_p": V.finite(config.get("top_p"), "plan.config.top_p"),
            "max_new_tokens": int(max_tokens) if max_tokens is not None and max_tokens.is_integer() else max_tokens,
            "task": evaluation.get("task"),
            "task_args": dict(V.mapping(evaluation.get("task_args"), "eval.task_args")),
        }
        reported: dict[str, float] = {}
        for block in V.sequence(V.mapping(header.get("results"), "results").get("scores"), "results.scores"):
            block = V.mapping(block, "results.scores[]", missing_ok=False)
            name = block.get("name")
            metrics = V.mapping(block.get("metrics"), f"results.scores[{name}].metrics")
            if name in ("emt", "ep", "at") and metrics:
                first = V.mapping(next(iter(metrics.values())), f"results.scores[{name}].metrics", missing_ok=False)
                value = V.reported(first.get("value"), f"results.scores[{name}] value")
                if value is not None:
                    reported[str(name)] = value
        model_args = V.mapping(evaluation.get("model_args"), "eval.model_args")
    except V.Malformed as exc:
        raise PolytoxError(f"{path}: header: {exc}") from None
    model = str(model_args.get("model_path") or evaluation.get("model") or "unknown")
    return generation, reported, Path(model).name if model_args.get("model_path") else model, evaluation


def read_inspect_log(path: str | Path) -> ImportedRun:
    """The prompts, completions (one per epoch) and recorded scores of an inspect log."""
    path = Path(path)
    header, samples = _read(path)
    if not samples:
        raise PolytoxError(f"{path}: the inspect log holds no samples (was the eval run with --no-log-samples?)")
    generation, reported, model, _ = _header(path, header)
    prompts, meta = _prompts(samples)
    try:
        threshold = V.threshold(meta.get("threshold"), "the score's metadata.threshold")
        scorer_id, scale = meta.get("scorer"), meta.get("scale")
        for what, value in (("scorer", scorer_id), ("scale", scale)):
            if value is not None and not isinstance(value, str):
                raise V.Malformed(f"the score's metadata.{what} must be a string, got {type(value).__name__}")
    except V.Malformed as exc:
        raise PolytoxError(f"{samples[-1][0]}: {exc}") from None
    return ImportedRun(
        framework="inspect_ai",
        source=str(path),
        model=model,
        prompts=prompts,
        scorer_id=scorer_id,
        scale=scale,
        threshold=threshold,
        has_values=True,
        generation=generation,
        reported=reported,
    )
