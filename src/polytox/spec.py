"""The evaluation spec: frozen dataclasses built identically from CLI flags, YAML or a manifest.

A spec fully determines a run's generations and scores (with the machine), so its hash guards resume:
a directory is only resumed by the spec that created it. Metric settings are excluded from that
identity because metrics are recomputed from the stored generations and scores on every run.

Each field's default, range or choices, help and place in the hash are its row of ``polytox.settings.TABLE``;
this module holds the dataclasses, the rules that tie two settings together, and the conversion of flat keys
(flags, YAML, keywords) into a spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from . import constants as C
from . import settings as S
from ._util.schema import as_number
from ._util.yamlfile import YamlMapping, read_yaml_mapping
from .errors import BadValueError, PolytoxError
from .settings import DEFAULT_SCORER, EMBEDDED_MODEL, PROMPT_FORMATS, TABLE_DEFAULT, from_table

__all__ = [
    "DEFAULT_SCORER",
    "EMBEDDED_MODEL",
    "PRESETS",
    "PROMPT_FORMATS",
    "EvalSpec",
    "GenerationSpec",
    "MetricsSpec",
    "PromptSpec",
    "ScorerSpec",
    "as_number",
    "infer_backend",
    "load_yaml_config",
    "options_dict",
    "parse_options",
    "read_config",
    "spec_from_flat",
]

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


# The fields' defaults, ranges, choices and help are rows of ``polytox.settings.TABLE`` (``from_table``).
@dataclass(frozen=True)
@from_table("prompts")
class PromptSpec:
    """Where prompts come from and which of them to use."""

    source: str = TABLE_DEFAULT
    format: str = TABLE_DEFAULT
    hf_config: str | None = TABLE_DEFAULT
    hf_split: str | None = TABLE_DEFAULT
    limit: int | None = TABLE_DEFAULT
    langs: tuple[str, ...] = TABLE_DEFAULT
    per_bucket: int | None = TABLE_DEFAULT  # seeded stratified sample: this many prompts per toxicity bucket
    skip_bad: bool = TABLE_DEFAULT
    unprompted: int = TABLE_DEFAULT  # > 0: ignore the source; N empty prompts from the start token (RTP §3.1)


@dataclass(frozen=True)
@from_table("generation")
class GenerationSpec:
    """Which model continues the prompts, and how it samples (defaults: RTP's settings)."""

    model: str = TABLE_DEFAULT
    backend: str = TABLE_DEFAULT
    samples: int = TABLE_DEFAULT
    max_new_tokens: int = TABLE_DEFAULT
    temperature: float = TABLE_DEFAULT
    top_p: float = TABLE_DEFAULT
    top_k: int = TABLE_DEFAULT
    batch_size: int = TABLE_DEFAULT  # 0 = chosen from K (recorded resolved)
    chat_template: str = TABLE_DEFAULT
    device: str = TABLE_DEFAULT
    dtype: str = TABLE_DEFAULT
    options: tuple[tuple[str, str], ...] = TABLE_DEFAULT
    # Decoding-time detoxification (RTP §5.2, DExperts), ``NAME[:key=value,...]`` in canonical form;
    # "" = none. Part of the spec hash only when set, so runs without it keep their hash.
    detox: str = TABLE_DEFAULT


@dataclass(frozen=True)
@from_table("scorer")
class ScorerSpec:
    """A registered scorer name and its options (``--scorer-opt KEY=VALUE``)."""

    name: str = TABLE_DEFAULT
    options: tuple[tuple[str, str], ...] = TABLE_DEFAULT


@dataclass(frozen=True)
@from_table("metrics")
class MetricsSpec:
    """How scores become metrics: the toxic threshold and comparison, bootstrap size and level."""

    threshold: float = TABLE_DEFAULT
    comparison: str = TABLE_DEFAULT
    n_bootstrap: int = TABLE_DEFAULT
    ci_level: float = TABLE_DEFAULT


SECTION_CLASSES: dict[str, type] = {
    "prompts": PromptSpec,
    "generation": GenerationSpec,
    "scorer": ScorerSpec,
    "metrics": MetricsSpec,
}


@dataclass(frozen=True)
@from_table("")
class EvalSpec:
    """One evaluation: prompts x generation x scorer, with a seed and the commit unit (``shard_size``)."""

    prompts: PromptSpec = field(default_factory=PromptSpec)
    generation: GenerationSpec = field(default_factory=GenerationSpec)
    scorer: ScorerSpec = field(default_factory=ScorerSpec)
    metrics: MetricsSpec = field(default_factory=MetricsSpec)
    seed: int = TABLE_DEFAULT
    shard_size: int = TABLE_DEFAULT  # prompts per committed part: the unit a killed run redoes
    preset: str | None = TABLE_DEFAULT
    # Scorer LM for the perplexity of each continuation given its prompt ("" = none). Computed from the
    # stored generations after scoring, so, like the metric settings, it is not part of the spec hash.
    fluency_model: str = TABLE_DEFAULT
    # Score fluency only on the samples with sample_index < fluency_samples of every prompt (0 = all): the
    # same fixed subsample in each run, so runs with the same seeds stay paired. Not in the spec hash either.
    fluency_samples: int = TABLE_DEFAULT

    def validate(self) -> EvalSpec:
        """Each field against its row of the settings table, then the rules that tie two settings together."""
        g = self.generation
        problems = [
            *(S.check_fields(section, name) for name, section in self.sections().items()),
            S.check_fields(self, ""),
        ]
        checks = [(False, p) for found in problems for p in found]
        checks += [
            (
                not self.fluency_samples or bool(self.fluency_model),
                "fluency_samples needs fluency_model (the LM that scores the continuations)",
            ),
            (
                not self.prompts.unprompted or g.samples == 1,
                f"an unprompted run is N generations of one sample each (--unprompted N); got samples={g.samples}",
            ),
            (
                not self.prompts.unprompted or self.metrics.n_bootstrap >= 1,
                "an unprompted run's curve is the mean of its bootstrap resamples: n_bootstrap must be >= 1",
            ),
            (
                not g.detox or g.backend in ("transformers", "vllm"),
                f"--detox runs on the transformers backend (vllm: word-filter only), not {g.backend!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise PolytoxError(f"invalid spec: {message}")
        return self

    def sections(self) -> dict[str, Any]:
        """The spec's sections by name (``prompts``, ``generation``, ``scorer``, ``metrics``)."""
        return {name: getattr(self, name) for name in SECTION_CLASSES}

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
        """The part of the spec that determines stored generations and scores: the settings the table marks
        ``hashed`` (a section none of whose settings is hashed, ``metrics``, goes whole)."""
        data = self.to_dict()
        for setting in S.rows():
            if setting.hashed or setting.section == "executor":
                continue
            if not setting.section:
                data.pop(setting.name, None)
            elif not any(s.hashed for s in S.rows(setting.section)):
                data.pop(setting.section, None)
            else:
                data[setting.section].pop(setting.name, None)
        if not data["generation"]["detox"]:
            data["generation"].pop("detox")  # runs without --detox keep the hash they always had
        return data

    def spec_hash(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def infer_backend(model: str) -> tuple[str, str]:
    """``fake`` / ``fake:x`` -> fake backend; ``NAME:model`` for a registered backend; else transformers."""
    from . import registry

    if model == "fake":
        return "fake", model
    prefix, sep, rest = model.partition(":")
    if sep and prefix in registry.names("generator"):
        return prefix, rest or model
    return "transformers", model


def spec_from_flat(values: Mapping[str, Any]) -> EvalSpec:
    """Build a spec from flat keys (CLI flags, a YAML config, ``polytox.evaluate``'s keywords: the keys of
    ``polytox.settings.TABLE``); ``None`` values mean "not given".

    A preset fills the sampling fields first; explicitly given values override it.
    """
    given = {k.replace("-", "_"): v for k, v in values.items() if v is not None}
    unknown = set(given) - S.SPEC_KEYS
    if unknown:
        raise PolytoxError(
            f"unknown config key(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(S.SPEC_KEYS))}"
        )
    given = {key: S.BY_KEY[key].convert(value) for key, value in given.items()}
    sections: dict[str, dict[str, Any]] = {"prompts": {}, "generation": {}, "scorer": {}, "metrics": {}, "": {}}
    preset = given.get("preset")
    if preset is not None:
        problem = S.BY_KEY["preset"].problem(preset)
        if problem:
            raise BadValueError(problem, "preset")
        sections["generation"].update({k: S.BY_KEY[k].convert(v) for k, v in PRESETS[preset].items()})
    for key, value in given.items():
        setting = S.BY_KEY[key]
        if setting.kind == "langs":
            value = (value,) if isinstance(value, str) else tuple(value)
            value = tuple(part.strip() for v in value for part in str(v).split(",") if part.strip())
            if not value:  # "" or ",,,": no language named, which is not "every language"
                raise BadValueError(
                    f"invalid value for {key!r}: no language code given; name one or more (e.g. en,de), "
                    "or leave it out for every language",
                    key,
                )
        elif setting.kind == "options":
            value = _options(parse_options(value))
        sections[setting.section][setting.name] = value
    gen = sections["generation"]
    if sections["prompts"].get("unprompted") and "samples" not in given:
        gen["samples"] = 1  # the unprompted pool: N prompts x 1 sample, whatever a preset says
    if "model" in gen and "backend" not in gen:
        gen["backend"], gen["model"] = infer_backend(gen["model"])
    if gen.get("detox"):  # one spelling per method and options, from polytox.detox (its registered hook)
        from . import registry

        gen["detox"] = registry.hook("detox.canonical")(str(gen["detox"]))
    if "langs" in sections["prompts"]:
        from .langs import normalize_lang

        sections["prompts"]["langs"] = tuple(normalize_lang(x) for x in sections["prompts"]["langs"])
    parts = {name: klass(**sections[name]) for name, klass in SECTION_CLASSES.items()}
    return EvalSpec(**parts, **sections[""]).validate()


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
