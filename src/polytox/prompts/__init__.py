"""Prompt sources: RTP, PTP, RTP-LX, generic JSONL/CSV/Parquet, Hugging Face datasets, built-in demo.

``load_prompts(spec, seed)`` validates every record before any work starts. Bad records stop the load
with a ``BadInputError`` listing ``file:line: reason`` for each, unless ``spec.skip_bad`` is set, in which
case they are counted and listed in the returned ``PromptSet`` (and in the run manifest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

from ..errors import BadInputError, PolytoxError
from ..spec import PromptSpec
from ..types import Prompt
from .readers import RawRecord, read_records
from .records import RecordError, convert
from .select import select_prompts
from .set import PromptSet

__all__ = ["PromptSet", "demo_path", "iter_raw", "load_prompts"]

MAX_LISTED_PROBLEMS = 50


def demo_path() -> Path:
    """The built-in demo set: short sentence prefixes, neutral to mildly rude, in PTP's 17 languages."""
    return Path(str(resources.files("polytox") / "data" / "demo_prompts.jsonl"))


def _is_hf_id(source: str) -> bool:
    return not Path(source).exists() and source.count("/") == 1 and not source.startswith((".", "/"))


def iter_raw(spec: PromptSpec) -> Iterator[RawRecord]:
    """Raw records of the spec's source, in a stable order."""
    if spec.source in ("demo", "builtin:demo"):
        yield from read_records(demo_path())
    elif _is_hf_id(spec.source):
        from .hf import read_hf_dataset

        yield from read_hf_dataset(spec.source, spec.hf_config, spec.hf_split)
    else:
        yield from read_records(Path(spec.source))


def _is_content_id(prompt: Prompt) -> bool:
    """Ids derived from the text itself (no key in the source): the same text twice is two prompts."""
    return prompt.id.startswith(("txt:", "ptp:")) or (prompt.source == "rtp" and prompt.id.count(":") == 1)


def _convert_all(raw: Iterable[RawRecord], fmt: str) -> tuple[list[Prompt], list[str], list[str], int]:
    """Validated prompts, problems (``location: reason``), notes and the number of records read.

    A repeated id is handled by what it is: a content-derived id gets a stable ``#n`` suffix; a keyed id
    (RTP file span, RTP-LX index, an ``id`` column) repeating the same prompt is an exact duplicate,
    skipped and noted (RTP's toxic and non-toxic files share records); the same key with another text
    or score is a bad record.
    """
    prompts: list[Prompt] = []
    problems: list[str] = []
    first: dict[str, tuple[Prompt, str]] = {}
    seen: dict[str, int] = {}
    duplicates: list[str] = []
    n = 0
    for item in raw:
        n += 1
        if item.error is not None:
            problems.append(f"{item.location}: {item.error}")
            continue
        try:
            prompt = convert(item.record, fmt, text_cells=item.text_cells)
        except RecordError as exc:
            problems.append(f"{item.location}: {exc}")
            continue
        count = seen.get(prompt.id, 0)
        seen[prompt.id] = count + 1
        if count:
            earlier, where = first[prompt.id]
            if _is_content_id(prompt):
                # The suffix counts occurrences in source order, so ids stay stable across runs.
                prompt = dataclasses.replace(prompt, id=f"{prompt.id}#{count + 1}")
            elif (prompt.text, prompt.lang, prompt.toxicity) == (earlier.text, earlier.lang, earlier.toxicity):
                duplicates.append(f"{item.location} repeats {where}")
                continue
            else:
                problems.append(
                    f"{item.location}: duplicate id {prompt.id!r} with another text or score than at {where}"
                )
                continue
        else:
            first[prompt.id] = (prompt, item.location)
        prompts.append(prompt)
    notes = []
    if duplicates:
        shown = "; ".join(duplicates[:5]) + (" ..." if len(duplicates) > 5 else "")
        notes.append(f"{len(duplicates)} exact duplicate record(s) of the same prompt skipped ({shown})")
    return prompts, problems, notes, n


def load_prompts(spec: PromptSpec, seed: int = 0) -> PromptSet:
    """Read, validate and select prompts. Raises ``BadInputError`` on bad records unless ``skip_bad``."""
    if spec.unprompted:
        from .unprompted import unprompted_prompts

        return unprompted_prompts(spec)
    fmt = "generic" if spec.source in ("demo", "builtin:demo") else spec.format
    prompts, problems, duplicate_notes, n = _convert_all(iter_raw(spec), fmt)
    if problems and not spec.skip_bad:
        shown = problems[:MAX_LISTED_PROBLEMS]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise BadInputError(
            f"{len(problems)} bad record(s) in {spec.source} (nothing was run; pass --skip-bad to skip "
            f"them):\n  " + "\n  ".join(shown) + more,
            problems,
        )
    selected, notes = select_prompts(prompts, spec, seed)
    notes = duplicate_notes + notes
    if not selected:
        raise PolytoxError(
            f"no prompts selected from {spec.source} ({n} records, {len(problems)} bad; "
            f"filters: langs={list(spec.langs) or 'all'}, limit={spec.limit})"
        )
    return PromptSet(prompts=selected, n_records=n, problems=problems, notes=notes)
