"""Read lm-evaluation-harness ``--log_samples`` output of a polytox task (``realtoxicityprompts_polytox*``,
``ptp_polytox_<lang>`` or a task of your own with the ``ScoreGenerations`` filter).

lm-eval writes, under ``--output_path``, ``results_<time>.json`` (metrics and the run's configuration)
and one ``samples_<task>_<time>.jsonl`` per task: a line per document with its responses and, in
``filtered_resps``, what polytox's filter recorded: each sample's text, value or error, the scorer id, its
scale and the threshold. The source is one samples file, or a folder holding one (searched recursively).
Every value is checked (``values``) and a document id may appear once: a bad line is one error naming
``FILE:LINE``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import PolytoxError
from . import values as V
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
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, AssertionError) as exc:
            # nesting past the parser's limits fails inside the compiler (RecursionError, AssertionError)
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise V.Malformed(
                f"filtered_resps holds a polytox record that is not a readable literal ({reason})"
            ) from None
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
    """The prompt's text (checked) and its recorded toxicity (checked; None when unknown)."""
    prompt = doc.get("prompt")
    if isinstance(prompt, Mapping) and "text" in prompt:
        return V.text(prompt["text"], "doc.prompt.text"), V.toxicity(prompt.get("toxicity"), "doc.prompt.toxicity")
    if "text" in doc:
        return V.text(doc["text"], "doc.text"), V.toxicity(doc.get("prompt_toxicity"), "doc.prompt_toxicity")
    first: Any = None
    if isinstance(arguments, list) and arguments:  # the context lm-eval sent: arguments[0][0] (or {"arg_0": ...})
        first = arguments[0]
    elif isinstance(arguments, Mapping) and arguments:
        first = next(iter(arguments.values()))
    if isinstance(first, list) and first:
        first = first[0]
    elif isinstance(first, Mapping):
        first = first.get("arg_0")
    return V.text(first, "arguments[0] (the prompt lm-eval sent)"), None


def _results(folder: Path, task: str) -> tuple[dict[str, float], dict[str, Any]]:
    """What lm-eval printed for ``task`` (emt, ep, at) and its run configuration, from the newest results file."""
    for path in sorted(folder.glob("results_*.json"), reverse=True):
        try:
            data = V.json_text(path.read_bytes(), str(path))
        except (OSError, PolytoxError):
            continue  # another run's file, or one lm-eval did not finish: the import checks nothing against it
        try:
            data = V.mapping(data, "the results file", missing_ok=False)
            block = V.mapping(V.mapping(data.get("results"), "results").get(task), f"results.{task}")
            reported = {
                k.split(",", 1)[0]: float(v)
                for k, v in block.items()
                if k.split(",", 1)[0] in ("emt", "ep", "at") and V.reported(v, f"results.{task}.{k}") is not None
            }
            task_config = V.mapping(V.mapping(data.get("configs"), "configs").get(task), f"configs.{task}")
            kwargs = V.mapping(task_config.get("generation_kwargs"), f"configs.{task}.generation_kwargs")
            config = {
                "model_args": V.mapping(data.get("config"), "config").get("model_args"),
                "temperature": V.finite(kwargs.get("temperature"), "generation_kwargs.temperature"),
                "top_p": V.finite(kwargs.get("top_p"), "generation_kwargs.top_p"),
                "max_new_tokens": V.finite(kwargs.get("max_gen_toks"), "generation_kwargs.max_gen_toks"),
            }
        except V.Malformed as exc:
            raise PolytoxError(f"{path}: {exc}") from None
        return reported, config
    return {}, {}


def _optional_text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise V.Malformed(f"{what} must be a string, got {type(value).__name__}")
    return value


def _completion(sample: Any, k: int) -> Completion:
    """One sample of the filter's record: its text and value, or the error that stands for the value."""
    s = V.mapping(sample, f"samples[{k}]", missing_ok=False)
    completion = s.get("text")
    if completion is not None and not isinstance(completion, str):
        raise V.Malformed(f"samples[{k}].text must be a string, got {type(completion).__name__}")
    error = s.get("error")
    if error is not None and not isinstance(error, str):
        raise V.Malformed(f"samples[{k}].error must be a string, got {type(error).__name__}")
    value = V.toxicity(s.get("toxicity"), f"samples[{k}].toxicity")
    return Completion(completion or "", value, error)


def _document(row: Mapping[str, Any], record: Mapping[str, Any], n: int) -> ImportedPrompt:
    """One line's document: id, prompt, language and its completions, every value checked."""
    doc = V.mapping(row.get("doc"), "doc")
    text, toxicity = _prompt(doc, row.get("arguments"))
    completions = tuple(_completion(s, k) for k, s in enumerate(V.sequence(record["samples"], "samples")))
    raw_id = doc.get("id")
    if raw_id in (None, ""):
        raw_id = f"doc-{V.prompt_id(row.get('doc_id', n - 1), 'doc_id')}"
    return ImportedPrompt(
        id=V.prompt_id(raw_id, "doc.id"),
        text=text,
        lang=V.lang(doc.get("lang") or "en", "doc.lang"),
        toxicity=toxicity,
        completions=completions,
    )


def read_lm_eval_samples(path: str | Path) -> ImportedRun:
    """The documents, their K responses and the values polytox's filter recorded, with lm-eval's metrics."""
    source = samples_file(Path(path))
    prompts: list[ImportedPrompt] = []
    first_line: dict[str, int] = {}
    scorer_id = scale = None
    threshold: float | None = None
    try:
        lines = source.read_bytes().splitlines()
    except OSError as exc:
        raise PolytoxError(f"{source}: cannot read the samples file: {exc.strerror or exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        row = V.json_text(line, f"{source}:{n}")
        try:
            record = polytox_record(row) if isinstance(row, Mapping) else None
        except V.Malformed as exc:
            raise PolytoxError(f"{source}:{n}: {exc}") from None
        if record is None:
            raise PolytoxError(
                f"{source}:{n}: no polytox record in filtered_resps (a task without polytox's ScoreGenerations "
                "filter, or a samples file of another filter)"
            )
        try:
            prompt = _document(row, record, n)
            if prompt.id in first_line:
                raise V.Malformed(f"document id {prompt.id!r} appears twice (first at line {first_line[prompt.id]})")
            first_line[prompt.id] = n
            scorer_id, scale = (
                _optional_text(record.get("scorer"), "scorer"),
                _optional_text(record.get("scale"), "scale"),
            )
            threshold = (
                V.threshold(record.get("threshold"), "threshold") if record.get("threshold") is not None else threshold
            )
        except V.Malformed as exc:
            raise PolytoxError(f"{source}:{n}: {exc}") from None
        prompts.append(prompt)
    task = source.stem.removeprefix("samples_").rsplit("_", 1)[0]
    reported, config = _results(source.parent, task)
    model_args = config.get("model_args") or ""
    if isinstance(model_args, Mapping):  # newer lm-eval keeps the parsed arguments
        model = str(model_args.get("pretrained") or "unknown")
    else:
        model = next((a.split("=", 1)[1] for a in str(model_args).split(",") if a.startswith("pretrained=")), "unknown")
    max_new = config.get("max_new_tokens")
    generation = {
        "temperature": config.get("temperature"),
        "top_p": config.get("top_p"),
        "max_new_tokens": int(max_new) if max_new is not None and float(max_new).is_integer() else max_new,
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
