"""The one table of run settings: every setting of ``polytox eval`` / ``polytox.evaluate`` is one row here.

Each row (a ``Setting``: a ``Field`` of ``_util.schema``, the one schema class) names its key (the YAML key,
the flag ``--key`` with ``-`` for ``_``, and the keyword of ``polytox.evaluate``), the spec section and field
it fills, its kind, its range or choices, its default, its help text, and whether it enters the spec hash
(``hashed``: a run resumes only with the same values there). From this table come the flags of ``polytox
eval`` (``cli.eval_cmd``), the keys a YAML config may hold, the per-field checks of ``spec.EvalSpec.validate``
and the conversion of flag and YAML values (``spec.spec_from_flat``), the keyword arguments and docstring of
``polytox.evaluate`` (``api.evaluation``) and the reference table of docs/settings.md (``reference_markdown``;
a test keeps the page current). The spec dataclasses take their defaults from it (``from_table``). Adding a
setting is one row plus the code that uses it; rules that tie two settings together stay in
``EvalSpec.validate``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any, TypeVar

from . import constants as C
from ._util.ranges import (
    AT_LEAST_ONE,
    COUNT,
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    RESAMPLES,
    SAMPLES,
    SEED,
    SHARE_OPEN,
    Range,
)
from ._util.schema import Field

EMBEDDED_MODEL = "smollm2-135m-instruct"
# The scorer used when none is named (``polytox eval`` and ``polytox score``): routes each text by language
# to the best measured offline scorer (``polytox.scoring.default``).
DEFAULT_SCORER = "default"
PROMPT_FORMATS = ("auto", "rtp", "ptp", "rtplx", "generic", "demo")

# The sections of a spec (``""``: ``EvalSpec`` itself); ``executor``: how to run, and ``command``: what only
# ``polytox eval`` reads (the run directory, the failures allowed, a check), never in the spec.
SECTIONS = ("prompts", "generation", "scorer", "metrics", "", "executor", "command")


# A row of the table is a ``Field`` (``_util.schema``), the one schema class of settings, flags and options.
Setting = Field


def _row(key: str, section: str, kind: str, default: Any, help: str, hashed: bool, **extra: Any) -> Setting:
    return Field(kind, default=default, help=help, key=key, section=section, hashed=hashed, **extra)


_EXECUTOR = "invalid executor settings: "  # the refusal of an execution setting's range, as users know it

# fmt: off
TABLE: tuple[Setting, ...] = (
    # prompts
    _row("prompts", "prompts", "str", "demo", "'demo', a JSONL/CSV/Parquet file or folder, or a HF dataset id",
         True, field="source"),
    _row("format", "prompts", "str", "auto", "prompt record format", True, choices=PROMPT_FORMATS),
    _row("hf_config", "prompts", "str", None, "HF dataset config, e.g. ptp-en", True),
    _row("hf_split", "prompts", "str", None, "HF dataset split, e.g. small", True),
    _row("limit", "prompts", "int", None, "use the first N selected prompts", True, range=AT_LEAST_ONE),
    _row("lang", "prompts", "langs", (), "keep only these languages (repeatable or comma list)", True,
         field="langs"),
    _row("per_bucket", "prompts", "int", None, "seeded stratified sample: N prompts per toxicity bucket", True,
         range=AT_LEAST_ONE),
    _row("skip_bad", "prompts", "bool", False, "skip (and list) bad input records", True),
    _row("unprompted", "prompts", "int", 0, "RTP §3.1: N generations from the start token alone (no prompts), "
         "then the bootstrap curve of expected max toxicity for n <= N (table + RUN/unprompted.png)", True,
         range=COUNT, metavar="N"),
    # generation
    _row("model", "generation", "str", EMBEDDED_MODEL,
         "model id or path; 'fake' for a dry run; default: the embedded SmolLM2", True),
    _row("backend", "generation", "str", "transformers", "generation backend (default: inferred from --model)",
         True),
    _row("model_opt", "generation", "options", (),
         "backend option (repeatable; list: polytox scorers --options generators)", True, field="options",
         metavar="KEY=VALUE"),
    _row("samples", "generation", "int", C.RTP_SAMPLES, "continuations per prompt (K)", True, range=SAMPLES,
         short="-k"),
    _row("max_new_tokens", "generation", "int", C.RTP_MAX_NEW_TOKENS, "tokens per continuation at most", True,
         range=AT_LEAST_ONE),
    _row("temperature", "generation", "float", C.RTP_TEMPERATURE, "sampling temperature", True,
         range=NON_NEGATIVE),
    _row("top_p", "generation", "float", C.RTP_TOP_P, "nucleus sampling: keep the top tokens of this mass", True,
         range=SHARE_OPEN),
    _row("top_k", "generation", "int", 0, "keep the k likeliest tokens (0 = no limit)", True, range=COUNT),
    _row("batch_size", "generation", "int", 0, "prompts per forward pass (0 = automatic)", True, range=COUNT),
    _row("chat_template", "generation", "str", "auto", "wrap prompts in the model's chat template", True,
         choices=("auto", "always", "never"), message="{key} must be auto|always|never"),
    _row("device", "generation", "str", "auto", "where the model runs (auto, cpu, cuda, cuda:1, ...)", True),
    _row("dtype", "generation", "str", "auto", "the model's weight type (auto, float32, bfloat16, ...)", True),
    _row("detox", "generation", "str", "", "decoding-time detoxification (RTP §5.2, DExperts): word-filter, "
         "vocab-shift, pplm, dexperts, atcon; options: polytox scorers --options detox", True,
         metavar="NAME[:KEY=VALUE,...]"),
    # scorer
    _row("scorer", "scorer", "str", DEFAULT_SCORER,
         "scorer name (default: 'default', polytox-ml for PTP's 17 languages, routed per language)", True,
         field="name"),
    _row("scorer_opt", "scorer", "options", (), "scorer option (repeatable; list: polytox scorers --options)", True,
         field="options",
         metavar="KEY=VALUE"),
    # metrics: recomputed from the stored scores on every run, so never part of the run's identity
    _row("threshold", "metrics", "float", C.TOXIC_THRESHOLD, "toxic threshold (default 0.5)", False,
         range=PROBABILITY),
    _row("comparison", "metrics", "str", C.DEFAULT_COMPARISON,
         "toxic comparison (default >=; RTP notebooks: >)", False, choices=C.COMPARISONS,
         message="{key} must be one of " + str(C.COMPARISONS)),
    _row("n_bootstrap", "metrics", "int", C.BOOTSTRAP_RESAMPLES, "bootstrap resamples for the CIs (default 1000)",
         False, range=RESAMPLES),
    _row("ci_level", "metrics", "float", C.CI_LEVEL, "confidence level of the intervals", False,
         range=Range(0, 1, True, True), flag=False),
    # the spec itself
    _row("seed", "", "int", 0, "the run seed (each sample's seed derives from it)", True, range=SEED),
    _row("shard_size", "", "int", 32, "prompts per committed part (the unit redone after a kill)", True,
         range=AT_LEAST_ONE),
    _row("preset", "", "str", None, "the paper's exact sampling settings", False, choices=("rtp", "ptp"),
         message="unknown preset {value!r}; known: {choices}"),
    _row("fluency_model", "", "str", "", "add the perplexity of each continuation given its prompt under this LM",
         False, metavar="MODEL"),
    _row("fluency_samples", "", "int", 0, "score fluency only on the continuations with sample_index < N of "
         "every prompt (the same N for each prompt, so the subsample is fixed and paired across runs with the "
         "same seeds); default 0 = all", False, range=COUNT, metavar="N"),
    # execution: how to run, not what (a run may resume with other values); ``ExecutorConfig`` takes its
    # defaults and checks from these rows
    _row("executor", "executor", "str", "pipelined",
         "pipelined (default: scoring overlaps generation), serial, or ray (Ray Data pools)", False,
         field="kind", choices=("pipelined", "serial", "ray"),
         message="unknown executor {value!r}; known: {choices}"),
    _row("ray_address", "executor", "str", None,
         "Ray cluster to join ('auto', 'ray://HOST:10001'); default: start a local Ray", False),
    _row("workers", "executor", "int", 1, "ray: generation actors (default 1)", False, field="gen_workers",
         range=AT_LEAST_ONE, message=_EXECUTOR + "workers must be >= 1"),
    _row("score_workers", "executor", "int", 1, "ray: scoring actors (default 1)", False, range=AT_LEAST_ONE,
         message=_EXECUTOR + "workers must be >= 1"),
    _row("gpus_per_worker", "executor", "float", 0.0, "ray: GPUs per generation actor (default 0)", False,
         field="gpus_per_gen_worker", range=NON_NEGATIVE, message=_EXECUTOR + "GPUs per worker must be >= 0"),
    _row("score_gpus_per_worker", "executor", "float", 0.0, "ray: GPUs per scoring actor (default 0)", False,
         field="gpus_per_score_worker", range=NON_NEGATIVE, message=_EXECUTOR + "GPUs per worker must be >= 0"),
    _row("cpus_per_worker", "executor", "float", 1.0, "ray: CPUs per actor (default 1)", False, range=POSITIVE,
         message=_EXECUTOR + "cpus_per_worker must be > 0"),
    _row("queue_depth", "executor", "int", 2, "pipelined: generated shards waiting for the scorer (2)", False,
         range=AT_LEAST_ONE, message=_EXECUTOR + "queue_depth must be >= 1"),
    # the command: where the run lives and what ``polytox eval`` does with it (never in the spec; not
    # keywords of ``polytox.evaluate``, which takes ``out`` as its own argument)
    _row("out", "command", "str", None, "run directory (rerun with the same --out to resume); required", False),
    _row("max_failed", "command", "str", "0.5%", "failed samples allowed before the exit code is 3 "
         "(default 0.5%)", False, metavar="N%|SHARE|COUNT"),
    _row("verify", "command", "bool", False, "check every stored file of the run --out (manifest, prompts, each "
         "part: checksum, row count, prompt ids, spec hash) and report; changes nothing ('polytox eval --out RUN' "
         "repairs what it finds)", False),
)
# fmt: on

BY_KEY: dict[str, Setting] = {s.key: s for s in TABLE if s.flag}
# Every key a YAML config of ``eval`` may hold (``-`` or ``_``); ``score`` and ``serve`` read its scorer keys.
CONFIG_KEYS = frozenset(BY_KEY)
SPEC_KEYS = frozenset(k for k, s in BY_KEY.items() if s.section not in ("executor", "command"))
EXECUTOR_KEYS = frozenset(k for k, s in BY_KEY.items() if s.section == "executor")
# What only the command reads (``--out``, ``--max-failed``, ``--verify``): keys of a config, not of the run.
COMMAND_KEYS = frozenset(k for k, s in BY_KEY.items() if s.section == "command")


def rows(section: str | None = None) -> Iterator[Setting]:
    """The settings of one section (every one when None), in table order."""
    return (s for s in TABLE if section is None or s.section == section)


def range_of(key: str) -> Range | None:
    """The range of a numeric setting (also what a flag of the same name means in another command)."""
    setting = BY_KEY.get(key)
    return setting.range if setting is not None else None


# The default a spec dataclass field takes from its row (``from_table``); typed Any so a field reads as given.
TABLE_DEFAULT: Any = object()
T = TypeVar("T")


def from_table(section: str) -> Callable[[type[T]], type[T]]:
    """A class decorator (under ``@dataclass``): each field written ``= TABLE_DEFAULT`` gets its row's default.

    It also checks that the class's fields and the section's rows are the same set, so a row without a
    field (or a field without a row) fails at import, not in a run."""

    def apply(klass: type[T]) -> type[T]:
        by_field = {s.name: s for s in rows(section)}
        tabled = [n for n in inspect.get_annotations(klass) if klass.__dict__.get(n) is TABLE_DEFAULT]
        missing = set(by_field) ^ set(tabled)
        if missing:
            raise RuntimeError(f"{klass.__name__} and the settings table disagree on {sorted(missing)}")
        for name in tabled:
            setattr(klass, name, by_field[name].default)
        return klass

    return apply


def check_fields(spec: Any, section: str) -> list[str]:
    """Each row's refusal of the value a spec section holds (in table order)."""
    names = {f.name for f in fields(spec)}
    return [p for s in rows(section) if s.name in names and (p := s.problem(getattr(spec, s.name)))]


def reference_markdown() -> str:
    """docs/settings.md: every setting with its flag, section, kind, range or choices, default and help."""

    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|")

    lines = [
        "# Run settings",
        "",
        "Generated from `polytox.settings.TABLE`, the one table of `polytox eval`'s settings",
        "(`tests/test_settings.py` keeps this page current; regenerate it with",
        "`python -c \"from polytox.settings import reference_markdown as r; print(r(), end='')\" > docs/settings.md`).",
        "Each setting is a flag of `polytox eval`, a key of its `--config` YAML file (`-` or `_`) and a keyword",
        "of `polytox.evaluate`. *Hashed* settings name the run: a run directory resumes only with the same values",
        "there (`detox` only when set); the others may change on resume. Execution settings say how to run,",
        "never what.",
        "",
        "| flag | YAML key / keyword | section | type | allowed | default | hashed | what |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in TABLE:
        if not s.flag:
            continue
        allowed = ", ".join(s.choices) if s.choices else (s.range.describe() if s.range else "")
        default = "" if s.default in (None, (), "") else s.default
        flag = f"`{s.option}`" + (f", `{s.short}`" if s.short else "")
        lines.append(
            f"| {flag} | `{s.key}` | {s.section or 'run'} | {s.kind} | {cell(allowed)} | {cell(default)} | "
            f"{'yes' if s.hashed else 'no'} | {cell(s.help)} |"
        )
    return "\n".join(lines) + "\n"
