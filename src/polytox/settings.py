"""The one table of run settings: every setting of ``polytox eval`` / ``polytox.evaluate`` is one row here.

Each ``Setting`` names its key (the YAML key, the flag ``--key`` with ``-`` for ``_``, and the keyword of
``polytox.evaluate``), the spec section and field it fills, its kind, its range or choices, its default, its
help text, and whether it enters the spec hash (``hashed``: a run resumes only with the same values there).
From this table come the flags of ``polytox eval`` (``cli.eval_cmd``), the keys a YAML config may hold, the
per-field checks of ``spec.EvalSpec.validate`` and the conversion of flag and YAML values
(``spec.spec_from_flat``), the keyword arguments and docstring of ``polytox.evaluate`` (``api.evaluation``)
and the reference table of docs/settings.md (``reference_markdown``; a test keeps the page current). The spec
dataclasses take their defaults from it (``from_table``). Adding a setting is one row plus the code that uses
it; rules that tie two settings together stay in ``EvalSpec.validate``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
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
from .errors import BadValueError

EMBEDDED_MODEL = "smollm2-135m-instruct"
# The scorer used when none is named (``polytox eval`` and ``polytox score``): routes each text by language
# to the best measured offline scorer (``polytox.scoring.default``).
DEFAULT_SCORER = "default"
PROMPT_FORMATS = ("auto", "rtp", "ptp", "rtplx", "generic", "demo")

# The sections of a spec (``""``: ``EvalSpec`` itself) and ``executor``: how to run, never in the spec.
SECTIONS = ("prompts", "generation", "scorer", "metrics", "", "executor")
KINDS = ("str", "int", "float", "bool", "langs", "options")


@dataclass(frozen=True)
class Setting:
    """One run setting: where it lives, what it accepts, its default, its help, whether it names the run.

    ``kind``: ``str``, ``int``, ``float``, ``bool``, ``langs`` (codes: a string, comma list or list) or
    ``options`` (``KEY=VALUE`` strings or a mapping). ``field``: the spec field when it differs from ``key``.
    ``flag``: False for a spec field that has no flag, YAML key or keyword (read from manifests only).
    ``message``: a choice's refusal in its own words (``{key}``, ``{value}``, ``{choices}``) where the
    generic ``KEY must be one of ..., got VALUE`` is not the line users have always read.
    """

    key: str
    section: str
    kind: str
    default: Any
    help: str
    hashed: bool
    range: Range | None = None
    choices: tuple[str, ...] = ()
    field: str = ""
    short: str = ""
    metavar: str = ""
    flag: bool = True
    message: str = ""

    @property
    def name(self) -> str:
        """The spec field (or ``ExecutorConfig`` field) this setting fills."""
        return self.field or self.key

    @property
    def option(self) -> str:
        """The command-line flag: ``--max-new-tokens``."""
        return "--" + self.key.replace("_", "-")

    def problem(self, value: Any) -> str | None:
        """Why a converted ``value`` is not allowed (``top_p must be in (0, 1], got 2.0``), or None."""
        if value is None:
            return None
        if self.choices and value not in self.choices:
            text = self.message or "{key} must be one of {choices}, got {value!r}"
            return text.format(key=self.key, value=value, choices=", ".join(self.choices))
        if self.range is not None and (problem := self.range.problem(value)):
            return f"{self.key} {problem}"
        return None

    def convert(self, value: Any) -> Any:
        """A flag or YAML value as this setting's kind (``BadValueError`` naming the key when it is not)."""
        if self.kind in ("int", "float"):
            return as_number(self.key, value, self.kind)
        if self.kind == "str" and not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadValueError(f"invalid value for {self.key!r}: expected a string, got {value!r}", self.key)
            return str(value)
        if self.kind == "bool" and not isinstance(value, bool):
            from ._util.options import FALSE_WORDS, TRUE_WORDS

            text = str(value).strip().lower()
            if text not in TRUE_WORDS + FALSE_WORDS:
                raise BadValueError(f"invalid value for {self.key!r}: expected true or false, got {value!r}", self.key)
            return text in TRUE_WORDS
        if self.kind == "langs" and not (
            isinstance(value, str) or (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value))
        ):
            raise BadValueError(
                f"invalid value for {self.key!r}: expected language codes (a string or a list of strings), "
                f"got {value!r}",
                self.key,
            )
        return value

    def annotation(self) -> str:
        """The type of ``polytox.evaluate``'s keyword for this setting (None: not given)."""
        return {
            "langs": "str | Sequence[str] | None",
            "options": "Mapping[str, Any] | Sequence[str] | None",
        }.get(self.kind, f"{self.kind} | None")


def as_number(key: str, value: Any, kind: str) -> int | float:
    """``value`` as the int or float a setting declares; anything else is a clear error naming ``key``."""
    expected = "an integer" if kind == "int" else "a number"
    bad = BadValueError(f"invalid value for {key!r}: expected {expected}, got {value!r}", key)
    if isinstance(value, bool):
        raise bad
    try:
        if kind == "float":
            return float(value)
        if isinstance(value, float):
            if not value.is_integer():
                raise bad
            return int(value)
        return int(str(value).strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise bad from None


def _row(key: str, section: str, kind: str, default: Any, help: str, hashed: bool, **extra: Any) -> Setting:
    return Setting(key, section, kind, default, help, hashed, **extra)


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
    # execution: how to run, not what (a run may resume with other values)
    _row("executor", "executor", "str", None,
         "pipelined (default: scoring overlaps generation), serial, or ray (Ray Data pools)", False,
         field="kind", choices=("pipelined", "serial", "ray"),
         message="unknown executor {value!r}; known: {choices}"),
    _row("ray_address", "executor", "str", None,
         "Ray cluster to join ('auto', 'ray://HOST:10001'); default: start a local Ray", False),
    _row("workers", "executor", "int", None, "ray: generation actors (default 1)", False, field="gen_workers",
         range=AT_LEAST_ONE),
    _row("score_workers", "executor", "int", None, "ray: scoring actors (default 1)", False, range=AT_LEAST_ONE),
    _row("gpus_per_worker", "executor", "float", None, "ray: GPUs per generation actor (default 0)", False,
         field="gpus_per_gen_worker", range=NON_NEGATIVE),
    _row("score_gpus_per_worker", "executor", "float", None, "ray: GPUs per scoring actor (default 0)", False,
         field="gpus_per_score_worker", range=NON_NEGATIVE),
    _row("cpus_per_worker", "executor", "float", None, "ray: CPUs per actor (default 1)", False, range=POSITIVE),
    _row("queue_depth", "executor", "int", None, "pipelined: generated shards waiting for the scorer (2)", False,
         range=AT_LEAST_ONE),
)
# fmt: on

BY_KEY: dict[str, Setting] = {s.key: s for s in TABLE if s.flag}
# Every key a YAML config of ``eval`` may hold (``-`` or ``_``); ``score`` and ``serve`` read its scorer keys.
CONFIG_KEYS = frozenset(BY_KEY)
SPEC_KEYS = frozenset(k for k, s in BY_KEY.items() if s.section != "executor")
EXECUTOR_KEYS = frozenset(k for k, s in BY_KEY.items() if s.section == "executor")


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
