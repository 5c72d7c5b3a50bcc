"""Every numeric flag range-checked and every output path checked, by rows and tables, before any work.

``install(parser)`` walks every subcommand of the finished parser and wraps the ``type`` of

- each ``int``/``float`` flag with the ``Range`` of its row (a ``Field`` of ``FLAG_NUMBERS``, looked up by
  command and flag, then by flag alone; else its row of the settings table), so ``--threshold 2`` is
  refused by argparse with one line and exit code 2; a numeric flag without a rule is a programming error
  (``install`` raises), so a new flag cannot skip the check;
- each flag that names an output with its kind (a ``Field`` of ``OUTPUTS``, whose ``path`` is a file, a
  folder, or a file or '-' for stdout): a folder where a file is wanted, a file where a folder is wanted,
  a path under a file, or a place that cannot be written (probed by creating and removing a temporary file
  in the nearest existing folder: permission bits alone say nothing for root, nor for a read-only mount) is
  refused before anything runs;
- comma lists of numbers (``train-scorer --layers 5,7,9``: a ``Field`` of ``NUMBER_LISTS``) with the kind
  and range of each item and, where the row says (``items``), their number.

Every rule is a row of the one schema class (``_util.schema.Field``), looked up by command and flag.

A run setting's range is its row of the settings table (``polytox.settings``), which also checks YAML specs
and ``polytox.evaluate``'s keywords (``spec.EvalSpec.validate``), so a value means the same in a config
file, on the command line and in Python.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.ranges import (
    AT_LEAST_ONE,
    COUNT,
    NON_NEGATIVE,
    PORT,
    POSITIVE,
    PROBABILITY,
    RESAMPLES_AT_LEAST_ONE,
    SHARE_OPEN,
    Range,
)
from .._util.schema import Field
from ..settings import range_of

TIER = Range(1, 4, integer=True)  # embedding tiers and scale-row priorities run 1 (first) to 4


def _number(dest: str, rule: Range, command: str = "") -> Field:
    """The row of a numeric flag (argparse dest ``dest``), in ``command`` only when it is named."""
    return Field("number", range=rule, key=dest, section=command)


# The numeric flags of the commands that are not run settings, as rows of the one schema (``Field``, kind
# ``number``: the flag's argparse type says int or float). A row with a ``section`` is that command's own
# meaning of a flag another command uses otherwise. A run setting (``polytox eval``'s flags: samples, top_p,
# threshold, seed, ...) has its range in its row of ``polytox.settings.TABLE``, and a flag of the same name
# in another command means the same there.
# fmt: off
FLAG_NUMBERS: tuple[Field, ...] = (
    _number("flag_threshold", PROBABILITY),
    _number("chunk_size", COUNT),
    _number("top", COUNT),
    _number("min_per_lang", COUNT),
    _number("holdout", Range(0, 1, hi_open=True)),
    _number("k", AT_LEAST_ONE),
    # build
    _number("per_bin", AT_LEAST_ONE),
    _number("small_per_lang", COUNT),
    _number("score_batch_size", AT_LEAST_ONE),
    _number("max_bytes", AT_LEAST_ONE),
    _number("span_min_chars", AT_LEAST_ONE),
    _number("span_max_chars", AT_LEAST_ONE),
    _number("prompt_max_tokens", AT_LEAST_ONE),
    _number("translate_max", COUNT),
    _number("translate_batch_size", AT_LEAST_ONE),
    _number("translate_max_new_tokens", AT_LEAST_ONE),
    _number("translate_beams", AT_LEAST_ONE),
    # train-scorer
    _number("max_tokens", AT_LEAST_ONE),
    _number("alpha_ngram", NON_NEGATIVE),
    _number("alpha_emb", NON_NEGATIVE),
    _number("other_rtplx_weight", NON_NEGATIVE),
    _number("attention_human_weight", NON_NEGATIVE),
    _number("everyday_weight", NON_NEGATIVE),
    _number("consistency_weight", NON_NEGATIVE),
    _number("probe_consistency_weight", NON_NEGATIVE),
    _number("teacher_weight", NON_NEGATIVE),
    _number("weight_rtplx", NON_NEGATIVE),
    _number("web_gen_share", PROBABILITY),
    _number("continuation_gen_share", PROBABILITY),
    _number("ngram_features", AT_LEAST_ONE),
    _number("folds", Range(2, integer=True)),
    _number("subset", SHARE_OPEN),
    # train-scorer-step
    _number("threads", AT_LEAST_ONE),
    _number("chunk", AT_LEAST_ONE),
    _number("max_tier", TIER),
    _number("max_priority", TIER),
    # corpus
    _number("min_domain_docs", COUNT),
    _number("min_docs", COUNT),
    _number("check_sample", COUNT),
    # serve
    _number("port", PORT),
    _number("qps", NON_NEGATIVE),
    _number("burst", NON_NEGATIVE),
    _number("max_batch", AT_LEAST_ONE),
    _number("max_wait_ms", NON_NEGATIVE),
    _number("max_queue", AT_LEAST_ONE),
    _number("max_queue_wait", NON_NEGATIVE),
    _number("max_body_bytes", AT_LEAST_ONE),
    _number("graceful_seconds", NON_NEGATIVE),
    # detox
    _number("percentile", Range(0, 50, lo_open=True)),
    _number("epochs", POSITIVE),
    _number("grad_accum", AT_LEAST_ONE),
    _number("lr", POSITIVE),
    _number("max_length", AT_LEAST_ONE),
    _number("save_steps", AT_LEAST_ONE),
    # a flag that means something else in one command
    _number("batch_size", AT_LEAST_ONE, "train-scorer"),  # texts per forward pass (eval's 0 = automatic)
    _number("batch_size", AT_LEAST_ONE, "detox train"),
    _number("batch_size", AT_LEAST_ONE, "train-scorer-step pool"),
    _number("max_steps", Range(-1, integer=True), "detox train"),  # -1 = no cap (epochs decide)
    # the curve is the resamples' mean: none is no curve
    _number("n_bootstrap", RESAMPLES_AT_LEAST_ONE, "unprompted"),
)
# fmt: on
BY_FLAG: dict[tuple[str, str], Field] = {(f.section, f.key): f for f in FLAG_NUMBERS}


def _output(dest: str, place: str, command: str) -> Field:
    """The row of flag ``dest`` of ``command`` naming an output: a ``file``, a ``dir`` or ``file-or-stdout``."""
    return Field("str", key=dest, section=command, path=place)


def _numbers(dest: str, kind: str, rule: Range, items: int, command: str) -> Field:
    """The row of flag ``dest`` of ``command`` holding a comma list of ``items`` numbers (0: any number)."""
    return Field(kind, range=rule, key=dest, section=command, items=items)


# The flags naming an output, as rows (``Field.path``: the kind of place each must be).
# fmt: off
OUTPUTS: tuple[Field, ...] = (
    _output("out", "dir", "eval"),
    _output("out", "dir", "build"),
    _output("stats_out", "dir", "build stats"),
    _output("out", "file", "score"),
    _output("out", "dir", "import"),
    _output("out", "file", "calibrate"),
    _output("report", "file", "compare-scorers"),
    _output("csv", "file", "leaderboard"),
    _output("markdown", "file", "leaderboard"),
    _output("json", "file-or-stdout", "leaderboard"),
    _output("plot_dir", "dir", "analyze"),
    _output("json", "file-or-stdout", "analyze"),
    _output("markdown", "file", "analyze"),
    _output("out", "file", "report"),
    _output("markdown", "file", "report"),
    _output("json", "file", "report"),
    _output("plot", "file", "unprompted"),
    _output("out", "file", "train-scorer"),
    _output("measurements", "file", "train-scorer"),
    _output("embedding_cache", "file", "train-scorer"),
    _output("plot", "file", "train-scorer"),
    _output("out", "dir", "train-scorer-step scale-rows"),
    _output("out", "file", "train-scorer-step scale-fit"),
    _output("measurements", "file", "train-scorer-step scale-fit"),
    _output("out", "dir", "corpus score"),
    _output("stats_out", "dir", "corpus stats"),
    _output("prov_out", "dir", "corpus provenance"),
    _output("index", "dir", "corpus overlap"),
    _output("out", "dir", "corpus overlap"),
    _output("out", "dir", "detox corpus"),
    _output("out", "dir", "detox train"),
    _output("markdown", "file", "detox compare"),
    _output("json", "file-or-stdout", "detox compare"),
)

# The flags holding a comma list of numbers, as rows (``Field.items``: how many, 0 for any number).
NUMBER_LISTS: tuple[Field, ...] = (
    _numbers("layers", "int", COUNT, 0, "train-scorer"),
    _numbers("layers", "int", COUNT, 0, "train-scorer-step pool"),
    _numbers("attention_penalties", "float", NON_NEGATIVE, 2, "train-scorer"),
    _numbers("english_attention_penalties", "float", NON_NEGATIVE, 2, "train-scorer"),
)
# fmt: on
ROWS: dict[tuple[str, str], Field] = {(f.section, f.key): f for f in (*OUTPUTS, *NUMBER_LISTS)}


@dataclass(frozen=True)
class Checked:
    """What ``install`` attached to an action: the kind of check and its rule (read by the tests)."""

    kind: str
    rule: Any


def number(kind: type, rule: Range) -> Callable[[str], Any]:
    """An argparse type: parse with ``kind``, then refuse a value outside ``rule`` (one line, exit 2)."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        problem = rule.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    convert.__name__ = kind.__name__
    convert.checked = Checked("number", rule)  # type: ignore[attr-defined]
    return convert


def number_list(row: Field) -> Callable[[str], str]:
    """An argparse type for a comma list of numbers (``row.items`` of them, 0: any number), each of
    ``row.kind`` within ``row.range``; the command splits it again (the text is returned)."""
    kind: type = int if row.kind == "int" else float
    count = row.items or None
    convert_one = number(kind, row.range or Range())

    def convert(text: str) -> str:
        items = [part.strip() for part in text.split(",") if part.strip()]
        if not items or (count is not None and len(items) != count):
            raise argparse.ArgumentTypeError(
                f"expected {count or 'a comma list of'} {kind.__name__} value(s) separated by commas, got {text!r}"
            )
        for item in items:
            try:
                convert_one(item)
            except argparse.ArgumentTypeError as exc:
                raise argparse.ArgumentTypeError(f"{exc} in {text!r}") from None
        return text

    convert.checked = Checked("list", row)  # type: ignore[attr-defined]
    return convert


def writable_folder(folder: Path) -> str | None:
    """None when a file can be created in ``folder`` (probed: created and removed at once), else why not."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".polytox-probe-"):
            pass
    except OSError as exc:
        return f"cannot write in {folder}: {exc.strerror or exc}"
    return None


def output_problem(text: str, kind: str) -> str | None:
    """Why ``text`` cannot be written as a ``kind`` ("file" or "dir"), or None. Creates nothing."""
    path = Path(text)
    if not text.strip():
        return "an empty path"
    if kind == "file" and path.is_dir():
        return f"{text} is a folder; give a file name"
    if kind == "dir" and path.exists() and not path.is_dir():
        return f"{text} is a file; give a folder"
    if kind == "file" and text.endswith(os.sep):
        return f"{text} names a folder; give a file name"
    folder = path if kind == "dir" and path.is_dir() else path.parent
    while not os.path.lexists(folder):
        folder = folder.parent
    if not folder.is_dir():
        return f"cannot write {text}: {folder} is a file, not a folder"
    if kind == "file" and path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            return f"cannot write {text}: {exc.strerror or exc}"
    return writable_folder(folder)


def output(kind: str, default: Any) -> Callable[[str], str]:
    """An argparse type for a flag naming an output: checked before anything runs (the default too, where the
    command uses it, but only when the command writes it: a default is passed through unchecked)."""

    def convert(text: str) -> str:
        if text is default or (kind == "file-or-stdout" and text == "-"):
            return text
        problem = output_problem(text, "dir" if kind == "dir" else "file")
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text

    convert.checked = Checked("output", kind)  # type: ignore[attr-defined]
    return convert


def command_actions(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.Action]]:
    """(command path, action) for every flag of every subcommand."""
    found: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += command_actions(sub, f"{prefix} {name}".strip())
        elif prefix:
            found.append((prefix, action))
    return found


def install(parser: argparse.ArgumentParser) -> None:
    """Attach the checks above to every subcommand's flags; a numeric flag without a rule raises."""
    for command, action in command_actions(parser):
        key = (command, action.dest)
        row = ROWS.get(key)
        if action.type in (int, float):
            number_row = BY_FLAG.get(key) or BY_FLAG.get(("", action.dest))
            rule = number_row.range if number_row is not None else range_of(action.dest)
            if rule is None:
                raise RuntimeError(f"{command} --{action.dest}: numeric flag without a range in cli/checks.py")
            action.type = number(action.type, rule)
        elif row is not None and row.path:
            action.type = output(row.path, action.default)
        elif row is not None and row.items is not None:
            action.type = number_list(row)
