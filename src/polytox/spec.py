"""The evaluation spec: frozen dataclasses built identically from CLI flags, YAML or a manifest.

A spec fully determines a run's generations and scores (with the machine), so its hash guards resume:
a directory is only resumed by the spec that created it. Metric settings are excluded from that
identity because metrics are recomputed from the stored generations and scores on every run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from . import constants as C
from ._util.ranges import AT_LEAST_ONE, COUNT, SAMPLES, SEED, Range
from ._util.yamlfile import YamlMapping, read_yaml_mapping
from .errors import BadValueError, PolytoxError

EMBEDDED_MODEL = "smollm2-135m-instruct"
# The scorer used when none is named (``polytox eval`` and ``polytox score``): routes each text by language
# to the best measured offline scorer (``polytox.scoring.default``).
DEFAULT_SCORER = "default"

PRESETS: dict[str, dict[str, Any]] = {
    # RTP §4.2 and Appendix B.4.
    "rtp": {
        "samples": C.RTP_SAMPLES,
        "top_p": C.RTP_TOP_P,
        "temperature": C.RTP_TEMPERATURE,
        "max_new_tokens": C.RTP_MAX_NEW_TOKENS,
        "top_k": 0,
    },
    # PTP §4, Implementation Details.
    "ptp": {
        "samples": C.PTP_SAMPLES,
        "top_p": C.PTP_TOP_P,
        "temperature": C.PTP_TEMPERATURE,
        "max_new_tokens": C.PTP_MAX_NEW_TOKENS,
        "top_k": 0,
    },
}


def _options(value: Mapping[str, Any] | tuple[tuple[str, Any], ...] | None) -> tuple[tuple[str, str], ...]:
    """Backend/scorer options as a sorted tuple of (key, string value): hashable and order-free."""
    if not value:
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


PROMPT_FORMATS = ("auto", "rtp", "ptp", "rtplx", "generic", "demo")


@dataclass(frozen=True)
class PromptSpec:
    """Where prompts come from and which of them to use."""

    source: str = "demo"
    format: str = "auto"  # auto | rtp | ptp | rtplx | generic | demo
    hf_config: str | None = None
    hf_split: str | None = None
    limit: int | None = None
    langs: tuple[str, ...] = ()
    per_bucket: int | None = None  # seeded stratified sample: this many prompts per toxicity bucket
    skip_bad: bool = False
    unprompted: int = 0  # > 0: ignore the source; N empty prompts, generated from the start token (RTP §3.1)


@dataclass(frozen=True)
class GenerationSpec:
    """Which model continues the prompts, and how it samples (defaults: RTP's settings)."""

    model: str = EMBEDDED_MODEL
    backend: str = "transformers"
    samples: int = C.RTP_SAMPLES
    max_new_tokens: int = C.RTP_MAX_NEW_TOKENS
    temperature: float = C.RTP_TEMPERATURE
    top_p: float = C.RTP_TOP_P
    top_k: int = 0
    batch_size: int = 0  # prompts per forward pass; 0 = chosen from K (recorded resolved)
    chat_template: str = "auto"  # auto | always | never
    device: str = "auto"
    dtype: str = "auto"
    options: tuple[tuple[str, str], ...] = ()
    # Decoding-time detoxification (RTP §5.2, DExperts), ``NAME[:key=value,...]`` in canonical form;
    # "" = none. Part of the spec hash only when set, so runs without it keep their hash.
    detox: str = ""


@dataclass(frozen=True)
class ScorerSpec:
    """A registered scorer name and its options (``--scorer-opt KEY=VALUE``)."""

    name: str = DEFAULT_SCORER
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class MetricsSpec:
    """How scores become metrics: the toxic threshold and comparison, bootstrap size and level."""

    threshold: float = C.TOXIC_THRESHOLD
    comparison: str = C.DEFAULT_COMPARISON
    n_bootstrap: int = C.BOOTSTRAP_RESAMPLES
    ci_level: float = C.CI_LEVEL


@dataclass(frozen=True)
class EvalSpec:
    """One evaluation: prompts x generation x scorer, with a seed and the commit unit (``shard_size``)."""

    prompts: PromptSpec = field(default_factory=PromptSpec)
    generation: GenerationSpec = field(default_factory=GenerationSpec)
    scorer: ScorerSpec = field(default_factory=ScorerSpec)
    metrics: MetricsSpec = field(default_factory=MetricsSpec)
    seed: int = 0
    shard_size: int = 32  # prompts per committed part: the unit a killed run redoes
    preset: str | None = None
    # Scorer LM for the perplexity of each continuation given its prompt ("" = none). Computed from the
    # stored generations after scoring, so, like the metric settings, it is not part of the spec hash.
    fluency_model: str = ""
    # Score fluency only on the samples with sample_index < fluency_samples of every prompt (0 = all): the
    # same fixed subsample in each run, so runs with the same seeds stay paired. Not in the spec hash either.
    fluency_samples: int = 0

    def validate(self) -> EvalSpec:
        g, m = self.generation, self.metrics
        checks = [
            (g.max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {g.max_new_tokens}"),
            (g.temperature >= 0, f"temperature must be >= 0, got {g.temperature}"),
            (0 < g.top_p <= 1, f"top_p must be in (0, 1], got {g.top_p}"),
            (g.top_k >= 0, f"top_k must be >= 0, got {g.top_k}"),
            (g.batch_size >= 0, f"batch_size must be >= 0, got {g.batch_size}"),
            (g.chat_template in ("auto", "always", "never"), "chat_template must be auto|always|never"),
            (self.shard_size >= 1, f"shard_size must be >= 1, got {self.shard_size}"),
            (self.fluency_samples >= 0, f"fluency_samples must be >= 0 (0 = all), got {self.fluency_samples}"),
            (
                not self.fluency_samples or bool(self.fluency_model),
                "fluency_samples needs fluency_model (the LM that scores the continuations)",
            ),
            (m.comparison in C.COMPARISONS, f"comparison must be one of {C.COMPARISONS}"),
            (0 <= m.threshold <= 1, f"threshold must be in [0, 1], got {m.threshold}"),
            (
                self.prompts.format in PROMPT_FORMATS,
                f"format must be one of {', '.join(PROMPT_FORMATS)}, got {self.prompts.format!r}",
            ),
            (self.prompts.limit is None or self.prompts.limit >= 1, "limit must be >= 1"),
            (self.prompts.unprompted >= 0, f"unprompted must be >= 0, got {self.prompts.unprompted}"),
            (
                not self.prompts.unprompted or g.samples == 1,
                f"an unprompted run is N generations of one sample each (--unprompted N); got samples={g.samples}",
            ),
            (
                not g.detox or g.backend in ("transformers", "vllm"),
                f"--detox runs on the transformers backend (vllm: word-filter only), not {g.backend!r}",
            ),
        ]
        # the ranges shared with the command-line flags (cli/checks.py): a config file means what a flag means
        ranged = [
            ("n_bootstrap", m.n_bootstrap, COUNT),
            ("ci_level", m.ci_level, Range(0, 1, True, True)),
            ("seed", self.seed, SEED),
            ("samples", g.samples, SAMPLES),
            ("per_bucket", self.prompts.per_bucket, AT_LEAST_ONE),
        ]
        checks += [
            (False, f"{name} {problem}")
            for name, value, rule in ranged
            if value is not None and (problem := rule.problem(value))
        ]
        for ok, message in checks:
            if not ok:
                raise PolytoxError(f"invalid spec: {message}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalSpec:
        """Rebuild a spec from ``to_dict`` output (a manifest's ``spec``)."""

        def build(klass: type, values: Mapping[str, Any] | None) -> Any:
            values = dict(values or {})
            known = {f.name for f in fields(klass)}
            unknown = set(values) - known
            if unknown:
                raise PolytoxError(f"unknown {klass.__name__} field(s): {', '.join(sorted(unknown))}")
            for key in ("langs",):
                if key in values:
                    values[key] = tuple(values[key])
            if "options" in values:
                values["options"] = _options(values["options"])
            return klass(**values)

        top = dict(data)
        return cls(
            prompts=build(PromptSpec, top.pop("prompts", None)),
            generation=build(GenerationSpec, top.pop("generation", None)),
            scorer=build(ScorerSpec, top.pop("scorer", None)),
            metrics=build(MetricsSpec, top.pop("metrics", None)),
            **{
                k: v
                for k, v in top.items()
                if k in ("seed", "shard_size", "preset", "fluency_model", "fluency_samples")
            },
        ).validate()

    def identity(self) -> dict[str, Any]:
        """The part of the spec that determines stored generations and scores."""
        data = self.to_dict()
        data.pop("metrics")
        data.pop("preset")
        data.pop("fluency_model")
        data.pop("fluency_samples")
        if not data["generation"]["detox"]:
            data["generation"].pop("detox")  # runs without --detox keep the hash they always had
        return data

    def spec_hash(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Flat keys shared by CLI flags and YAML configs, mapped to (section, field).
FLAT_KEYS: dict[str, tuple[str, str]] = {
    "prompts": ("prompts", "source"),
    "format": ("prompts", "format"),
    "hf_config": ("prompts", "hf_config"),
    "hf_split": ("prompts", "hf_split"),
    "limit": ("prompts", "limit"),
    "lang": ("prompts", "langs"),
    "per_bucket": ("prompts", "per_bucket"),
    "skip_bad": ("prompts", "skip_bad"),
    "unprompted": ("prompts", "unprompted"),
    "model": ("generation", "model"),
    "backend": ("generation", "backend"),
    "samples": ("generation", "samples"),
    "max_new_tokens": ("generation", "max_new_tokens"),
    "temperature": ("generation", "temperature"),
    "top_p": ("generation", "top_p"),
    "top_k": ("generation", "top_k"),
    "batch_size": ("generation", "batch_size"),
    "chat_template": ("generation", "chat_template"),
    "device": ("generation", "device"),
    "dtype": ("generation", "dtype"),
    "model_opt": ("generation", "options"),
    "scorer": ("scorer", "name"),
    "scorer_opt": ("scorer", "options"),
    "threshold": ("metrics", "threshold"),
    "comparison": ("metrics", "comparison"),
    "n_bootstrap": ("metrics", "n_bootstrap"),
    "seed": ("", "seed"),
    "shard_size": ("", "shard_size"),
    "preset": ("", "preset"),
    # detoxification (``polytox.detox``)
    "detox": ("generation", "detox"),
    "fluency_model": ("", "fluency_model"),
    "fluency_samples": ("", "fluency_samples"),
}


def infer_backend(model: str) -> tuple[str, str]:
    """``fake`` / ``fake:x`` -> fake backend; ``NAME:model`` for a registered backend; else transformers."""
    from . import registry

    if model == "fake":
        return "fake", model
    prefix, sep, rest = model.partition(":")
    if sep and prefix in registry.names("generator"):
        return prefix, rest or model
    return "transformers", model


def as_number(key: str, value: Any, kind: str) -> int | float:
    """``value`` as the int or float a spec field declares; anything else is a clear error."""
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


def _coerce(klass: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """Values from flags or YAML converted to the fields' declared types.

    YAML ``temperature: 1`` is an int and the flag ``--temperature 1`` a float; without this the two
    specs would hash differently and a resume would be refused although nothing changed.
    """
    types = {f.name: str(f.type).split(" | ")[0] for f in fields(klass)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        kind = types.get(key, "")
        out[key] = as_number(key, value, kind) if value is not None and kind in ("int", "float") else value
    return out


def _plain_values(given: Mapping[str, Any]) -> dict[str, Any]:
    """Flat values of the type their field declares, beyond numbers (``as_number``): a YAML list or mapping
    where a string belongs, ``skip_bad: maybe``, ``lang: 5`` are each a ``BadValueError`` naming the key."""
    from ._util.options import FALSE_WORDS, TRUE_WORDS

    classes: dict[str, type] = {
        "prompts": PromptSpec,
        "generation": GenerationSpec,
        "scorer": ScorerSpec,
        "metrics": MetricsSpec,
        "": EvalSpec,
    }
    out: dict[str, Any] = {}
    for key, value in given.items():
        section, name = FLAT_KEYS[key]
        kind = {f.name: str(f.type) for f in fields(classes[section])}[name].split(" | ")[0]
        if kind == "str" and not isinstance(value, str):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BadValueError(f"invalid value for {key!r}: expected a string, got {value!r}", key)
            value = str(value)
        elif kind == "bool" and not isinstance(value, bool):
            text = str(value).strip().lower()
            if text not in TRUE_WORDS + FALSE_WORDS:
                raise BadValueError(f"invalid value for {key!r}: expected true or false, got {value!r}", key)
            value = text in TRUE_WORDS
        elif name == "langs" and not (
            isinstance(value, str) or (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value))
        ):
            raise BadValueError(
                f"invalid value for {key!r}: expected language codes (a string or a list of strings), got {value!r}",
                key,
            )
        out[key] = value
    return out


def spec_from_flat(values: Mapping[str, Any]) -> EvalSpec:
    """Build a spec from flat keys (CLI flags or a YAML config); ``None`` values mean "not given".

    A preset fills the sampling fields first; explicitly given values override it.
    """
    given = {k.replace("-", "_"): v for k, v in values.items() if v is not None}
    unknown = set(given) - set(FLAT_KEYS)
    if unknown:
        raise PolytoxError(
            f"unknown config key(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(FLAT_KEYS))}"
        )
    given = _plain_values(given)
    preset = given.get("preset")
    sections: dict[str, dict[str, Any]] = {"prompts": {}, "generation": {}, "scorer": {}, "metrics": {}, "": {}}
    if preset is not None:
        if preset not in PRESETS:
            raise BadValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}", "preset")
        sections["generation"].update(PRESETS[preset])
    for key, value in given.items():
        section, name = FLAT_KEYS[key]
        if name == "langs":
            value = (value,) if isinstance(value, str) else tuple(value)
            value = tuple(part.strip() for v in value for part in str(v).split(",") if part.strip())
            if not value:  # "" or ",,,": no language named, which is not "every language"
                raise BadValueError(
                    f"invalid value for {key!r}: no language code given; name one or more (e.g. en,de), "
                    "or leave it out for every language",
                    key,
                )
        elif name == "options":
            value = _options(parse_options(value))
        sections[section][name] = value
    gen = sections["generation"]
    if sections["prompts"].get("unprompted") and "samples" not in given:
        gen["samples"] = 1  # the unprompted pool: N prompts x 1 sample, whatever a preset says
    if "model" in gen and "backend" not in gen:
        gen["backend"], gen["model"] = infer_backend(gen["model"])
    if gen.get("detox"):
        from .detox.methods import canonical_detox

        gen["detox"] = canonical_detox(str(gen["detox"]))
    if "langs" in sections["prompts"]:
        from .langs import normalize_lang

        sections["prompts"]["langs"] = tuple(normalize_lang(x) for x in sections["prompts"]["langs"])
    return EvalSpec(
        prompts=PromptSpec(**_coerce(PromptSpec, sections["prompts"])),
        generation=GenerationSpec(**_coerce(GenerationSpec, gen)),
        scorer=ScorerSpec(**_coerce(ScorerSpec, sections["scorer"])),
        metrics=MetricsSpec(**_coerce(MetricsSpec, sections["metrics"])),
        **_coerce(EvalSpec, sections[""]),
    ).validate()


def parse_options(value: Any) -> dict[str, Any]:
    """``KEY=VALUE`` strings (a list from repeated flags) or a mapping (YAML) -> dict."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if not isinstance(value, (str, list, tuple)):
        raise BadValueError(f"options must be KEY=VALUE strings or a mapping, got {value!r}", "scorer_opt")
    items = [value] if isinstance(value, str) else list(value)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key:
            raise PolytoxError(f"option {item!r} is not KEY=VALUE")
        out[key.strip()] = val.strip()
    return out


def load_yaml_config(path: str, known: Iterable[str] | None = None) -> dict[str, Any]:
    """Read a YAML config of flat keys (the same names as the CLI flags, ``-`` or ``_``).

    A missing, unreadable or invalid file, and (given ``known``) an unknown key, raise one
    ``PolytoxError`` naming the file and the line (``polytox._util.yamlfile``).
    """
    return read_config(path, known).data


def read_config(path: str, known: Iterable[str] | None = None) -> YamlMapping:
    """``load_yaml_config`` with the line of each key kept (for ``FILE:LINE`` in later messages)."""
    raw = read_yaml_mapping(path)
    config = YamlMapping(
        raw.path,
        {k.replace("-", "_"): v for k, v in raw.data.items()},
        {k.replace("-", "_"): line for k, line in raw.lines.items()},
    )
    if known is not None:
        config.check_keys(known)
    for key, value in config.data.items():
        if value is None:  # ``samples:`` with nothing after it is a slip, not "the default"
            raise PolytoxError(f"{config.where(key)}: {key!r} has no value (null); give one, or remove the key")
    return config


def options_dict(options: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(options)
