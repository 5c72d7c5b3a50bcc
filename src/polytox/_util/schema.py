"""``Field``: the one schema class of polytox, for every setting, flag and component option.

A run setting of ``polytox eval`` (a row of ``polytox.settings.TABLE``), an execution setting, a numeric,
number-list or output flag of another command (``cli.checks``), an option many components name alike
(``COMMON_OPTIONS`` below) and an option a scorer, generator backend or detox method declares (its
``OPTIONS``) are each one ``Field``: a name, a kind, a range or choices, a default and a help text, plus
where a run setting lives (its section and spec field), whether it names the run (``hashed``), how its flag
is shown, and for a flag of a list of numbers or of an output, how many items or which kind of place.
``problem`` is a setting's refusal of a converted value and ``convert`` its reading of a flag or YAML value;
``valid``, ``accepts`` and ``allowed`` are an option's check of a ``KEY=VALUE`` value as given and its words for it
(``_util.options`` applies them). ``settings.Setting`` and ``_util.options.Option`` are this class.
"""

from __future__ import annotations

import dataclasses as dc
from collections.abc import Mapping
from typing import Any

from ..errors import BadValueError
from . import ranges as R

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
# ``number``: a flag of another command whose argparse type (int or float) says which (``cli.checks``)
KINDS = ("str", "int", "float", "bool", "langs", "options", "number")
FINITE = R.Range()  # any finite number


@dc.dataclass(frozen=True)
class Field:
    """One setting, flag or option: its kind, choices or range, default and help; for a run setting also
    its key, section, spec field and flag.

    ``kind``: ``str``, ``int``, ``float``, ``bool``; a run setting may also be ``langs`` (codes: a string,
    comma list or list) or ``options`` (``KEY=VALUE`` strings or a mapping). ``words``: texts a number also
    accepts (``auto``). ``default``: the value used when none is given (None: none, or worked out at run time);
    it and ``help`` take no part in comparing two fields. ``key``: the name (a setting's YAML key, flag
    ``--key`` and keyword; a component's options are keyed by their mapping instead). ``section``: a run
    setting's spec section (``""``: ``EvalSpec`` itself, ``executor``: how to run, ``command``: what only
    ``polytox eval`` reads), or the command of a numeric flag. ``field``: the spec field when it differs from
    ``key``. ``flag``: False for a spec field with no flag, YAML key or keyword. ``message``: a refusal in its
    own words (``{key}``, ``{value}``, ``{choices}``) where the generic line is not the one users know.
    ``required``: an option that must be given, not empty (a detox method's model or weights); its help
    reads ``required: WHAT``, and the refusal names WHAT. ``items``: for a flag holding a comma list of
    numbers of ``kind`` (``--layers 5,7,9``), how many (0: any number; None: one value, not a list).
    ``path``: for a flag naming an output, the place it must be (``file``, ``dir``, or ``file-or-stdout``: a
    file, or ``-`` for standard output); checked before any work.
    """

    kind: str = "str"
    words: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    range: R.Range | None = None
    default: Any = dc.field(default=None, compare=False)
    help: str = dc.field(default="", compare=False)
    key: str = ""
    section: str = ""
    hashed: bool = False
    field: str = ""
    short: str = ""
    metavar: str = ""
    flag: bool = True
    message: str = ""
    required: bool = False
    items: int | None = None
    path: str = ""

    @property
    def name(self) -> str:
        """The spec field (or ``ExecutorConfig`` field) this setting fills."""
        return self.field or self.key

    @property
    def option(self) -> str:
        """The command-line flag: ``--max-new-tokens``."""
        return "--" + self.key.replace("_", "-")

    # ---- a run setting: a converted value checked, a flag or YAML value converted -------------------------
    def problem(self, value: Any) -> str | None:
        """Why a converted ``value`` is not allowed (``top_p must be in (0, 1], got 2.0``), or None."""
        if value is None:
            return None
        if self.choices and value not in self.choices:
            text = self.message or "{key} must be one of {choices}, got {value!r}"
            return text.format(key=self.key, value=value, choices=", ".join(self.choices))
        if self.range is not None and (problem := self.range.problem(value)):
            return self.message.format(key=self.key, value=value) if self.message else f"{self.key} {problem}"
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
        """The type of ``polytox.evaluate``'s keyword for this setting (None: not given); a closed set of
        choices is a ``Literal``, so a type checker refuses a value outside it."""
        if self.choices:
            return f"Literal[{', '.join(repr(c) for c in self.choices)}] | None"
        return {
            "langs": "str | Sequence[str] | None",
            "options": "Mapping[str, Any] | Sequence[str] | None",
        }.get(self.kind, f"{self.kind} | None")

    # ---- a component option: a ``KEY=VALUE`` value checked as given, and its words ------------------------
    def accepts(self) -> str:
        """Words for the error message: what a value of this option may be."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        base = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string"}[self.kind]
        if self.range is not None and self.kind in ("int", "float") and self.range.describe() != "a finite number":
            base += f" {self.range.describe()}"
        return base + "".join(f" or {w!r}" for w in self.words)

    def ranged(self, name: str) -> Field:
        """This option with the range ``COMMON_OPTIONS`` gives ``name`` when it declares none (a number only)."""
        common = COMMON.get(name)
        if self.range is not None or self.kind not in ("int", "float") or common is None:
            return self
        return dc.replace(self, range=common.range)

    def allowed(self) -> str:
        """The allowed values in a listing's words: ``[0, 1]``, ``>= 0``, ``a|b``, ``true/false``."""
        if self.choices:
            return "|".join(self.choices)
        if self.kind == "bool":
            return "true/false"
        if self.kind == "str":
            return "text"
        text = self.range.describe().removeprefix("in ") if self.range is not None else "any"
        if self.kind == "float" and self.range is None:
            text = "finite"
        return text + "".join(f" or {w}" for w in self.words)

    def valid(self, value: Any) -> bool:
        """Whether an option value as given (a flag's string, a YAML scalar) is one this option accepts."""
        if isinstance(value, Mapping | list | tuple | set):
            return False
        text = str(value).strip()
        if self.choices:
            return text in self.choices
        if self.kind == "str" or text in self.words:
            return True
        if self.kind == "bool":
            return isinstance(value, bool) or text.lower() in TRUE_WORDS + FALSE_WORDS
        if isinstance(value, bool):
            return False
        try:
            number = float(text)
        except ValueError:
            return False
        if self.kind == "int":
            whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer()) or _is_int(text)
            return whole and (self.range is None or self.range.contains(number))
        return (self.range or FINITE).contains(number)  # a float: never NaN or infinite


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


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


def _common(kind: str, rule: R.Range, *keys: str) -> tuple[Field, ...]:
    return tuple(Field(kind, range=rule, key=key) for key in keys)


# Options named alike in many scorers and backends: the range a plugin's option of that name takes when it
# declares no ``OPTIONS`` and its schema is read from its signature (``Field.ranged``); a declared range wins.
COMMON_OPTIONS: tuple[Field, ...] = (
    *_common("float", R.PROBABILITY, "fail_rate", "toxicity", "echo", "eos_rate", "threshold"),
    *_common("float", R.SHARE_OPEN, "gpu_memory_utilization"),
    *_common("float", R.NON_NEGATIVE, "delay", "rate", "qps", "backoff", "backoff_max", "max_backoff"),
    *_common("float", R.POSITIVE, "timeout"),
    *_common("int", R.COUNT, "batch_size", "lm_batch_size", "max_batch_tokens", "max_text_tokens", "max_retries"),
    *_common("int", R.COUNT, "min_admit", "slots"),
    *_common("int", R.AT_LEAST_ONE, "max_attempts", "concurrency", "tensor_parallel_size", "max_model_len"),
    *_common("int", R.AT_LEAST_ONE, "kv_cache_memory_bytes", "max_num_batched_tokens", "max_num_seqs", "check_every"),
)
COMMON: dict[str, Field] = {f.key: f for f in COMMON_OPTIONS}
