"""Find run directories and describe each: model, prompt set, stored scorers, and model metadata.

Metadata (family, parameter count, category, alignment method) comes from the run's manifest
(``model_meta``) and is overridden by a user YAML file::

    models:                    # keyed by the model name a run records (spec.generation.model)
      pythia-70m:  {family: pythia, params: 70m, category: base}
      tulu-2-7b-dpo: {family: tulu-2, params: 7b, category: preference, alignment: DPO}
    runs:                      # optional, keyed by run directory name: relabel one run
      lx-de-run: {model: pythia-70m, prompt_set: RTP-LX}

The categories are PTP's (§4.3): base, instruct, preference. A run's *prompt set* (for "prompt
sources", PTP §4.6) is the format its prompts were read as (RTP, RTP-LX, PTP, WildChat) unless the
manifest or the YAML names it.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ..errors import PolytoxError
from ..store.files import slug
from ..store.reader import RunReader

# PTP §4.3 "Base vs. Instruction-Tuning vs. Preference-Tuning": the model categories it compares.
CATEGORIES = ("base", "instruct", "preference")
META_FIELDS = ("family", "params", "category", "alignment")
RUN_FIELDS = ("model", "prompt_set", *META_FIELDS)

PROMPT_SET_NAMES = {"rtp": "RTP", "rtplx": "RTP-LX", "ptp": "PTP"}

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_params(value: Any) -> float | None:
    """A parameter count from ``70m``, ``1.4B``, ``7b``, ``1,400,000,000`` or a number; None if absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a parameter count: {value!r}")
    if isinstance(value, int | float):
        if value <= 0:
            raise ValueError(f"a parameter count must be positive, got {value!r}")
        return float(value)
    match = re.fullmatch(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbt]?)\s*", str(value).lower())
    if not match:
        raise ValueError(f"not a parameter count: {value!r} (expected e.g. 70m, 1.4b, 7B or a number)")
    number = float(match.group(1).replace(",", "").replace("_", ""))
    if number <= 0:
        raise ValueError(f"a parameter count must be positive, got {value!r}")
    return number * _SUFFIX[match.group(2)]


def format_params(params: float | None) -> str | None:
    """70000000 -> '70M', 1.4e9 -> '1.4B' (for tables)."""
    if params is None:
        return None
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= scale:
            return f"{params / scale:.3g}{suffix}"
    return f"{params:.3g}"


@dataclass(frozen=True)
class ModelMeta:
    """What PTP groups models by; every field may be unknown (None)."""

    family: str | None = None
    params: float | None = None
    category: str | None = None
    alignment: str | None = None

    def merged(self, other: ModelMeta) -> ModelMeta:
        """``other``'s known fields over this one's."""
        return ModelMeta(
            *(getattr(other, f) if getattr(other, f) is not None else getattr(self, f) for f in META_FIELDS)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "params": self.params,
            "params_label": format_params(self.params),
            "category": self.category,
            "alignment": self.alignment,
        }


def parse_meta(data: Mapping[str, Any], where: str) -> ModelMeta:
    """Validate one metadata mapping; ``where`` names it in errors (file and key, line when known)."""
    unknown = set(data) - set(RUN_FIELDS)
    if unknown:
        raise PolytoxError(
            f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(META_FIELDS)}"
        )
    try:
        params = parse_params(data.get("params"))
    except ValueError as exc:
        raise PolytoxError(f"{where}.params: {exc}") from None
    category = data.get("category")
    if category is not None:
        category = str(category).strip().lower()
        if category not in CATEGORIES:
            raise PolytoxError(
                f"{where}.category: {data['category']!r} is not one of {', '.join(CATEGORIES)} (PTP §4.3)"
            )
    alignment = data.get("alignment")
    family = data.get("family")
    return ModelMeta(
        family=None if family is None else str(family),
        params=params,
        category=category,
        alignment=None if alignment is None else str(alignment).strip().upper(),
    )


@dataclass(frozen=True)
class MetaFile:
    """A parsed user metadata YAML: per-model metadata and per-run overrides."""

    models: dict[str, ModelMeta] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: str | None = None


def _line_of(path: str, text: str, keys: Sequence[str]) -> str:
    """``path:line`` of a nested mapping key in a YAML text (best effort: ``path`` alone if not found)."""
    import yaml

    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return path
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return path
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                node = v
                line = k.start_mark.line + 1
                break
        else:
            return path
    return f"{path}:{line}"


def load_meta_file(path: str | Path | None) -> MetaFile:
    """Read a metadata YAML (see the module docstring); errors name the file, the line and the key."""
    if path is None:
        return MetaFile()
    import yaml

    p = Path(path)
    if not p.exists():
        raise PolytoxError(f"metadata file not found: {p}")
    text = p.read_text(encoding="utf-8")
    from .._util.yamlfile import load_limited, yaml_error

    try:
        data = load_limited(text)[1] or {}
    except yaml.YAMLError as exc:
        raise PolytoxError(yaml_error(p, exc)) from None
    if not isinstance(data, dict) or set(data) - {"models", "runs"}:
        raise PolytoxError(f"{p}: expected a mapping with 'models' and/or 'runs' (see `polytox leaderboard -h`)")
    for section in ("models", "runs"):
        if not isinstance(data.get(section) or {}, dict):
            raise PolytoxError(f"{_line_of(str(p), text, [section])}: '{section}' must be a mapping of names")
    models: dict[str, ModelMeta] = {}
    for name, entry in (data.get("models") or {}).items():
        where = f"{_line_of(str(p), text, ['models', str(name)])}: models.{name}"
        if not isinstance(entry, dict):
            raise PolytoxError(f"{where}: expected a mapping of {', '.join(META_FIELDS)}")
        if set(entry) - set(META_FIELDS):
            bad = sorted(map(str, set(entry) - set(META_FIELDS)))
            raise PolytoxError(f"{where}: unknown field(s) {', '.join(bad)}; known: {', '.join(META_FIELDS)}")
        models[str(name)] = parse_meta(entry, where)
    runs: dict[str, dict[str, Any]] = {}
    for name, entry in (data.get("runs") or {}).items():
        where = f"{_line_of(str(p), text, ['runs', str(name)])}: runs.{name}"
        if not isinstance(entry, dict):
            raise PolytoxError(f"{where}: expected a mapping of {', '.join(RUN_FIELDS)}")
        parse_meta(entry, where)  # validates
        runs[str(name)] = dict(entry)
    return MetaFile(models=models, runs=runs, path=str(p))


@dataclass(frozen=True)
class RunInfo:
    """One run directory as the analyses see it."""

    run_id: str
    path: Path
    model: str
    backend: str
    prompt_set: str
    scorer_ids: tuple[str, ...]  # directory names under scores/ (slugged scorer ids)
    default_scorer: str | None  # the scorer the run was evaluated with (slugged)
    meta: ModelMeta
    status: str
    manifest: dict[str, Any] = field(compare=False, hash=False, repr=False)

    def label(self) -> str:
        return f"{self.model} · {self.prompt_set}"


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories named directly or found (recursively, sorted) under the given folders."""
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise PolytoxError(f"no such run directory: {p}")
        if (p / "manifest.json").is_file() or (p / "prompts.parquet").is_file():  # a lost manifest: damage
            candidates = [p]
        else:
            candidates = sorted(m.parent for m in p.rglob("manifest.json"))
            if not candidates:
                raise PolytoxError(f"{p} is not a polytox run directory and contains none (no manifest.json)")
        for c in candidates:
            key = c.resolve()
            if key not in seen:
                seen.add(key)
                found.append(c)
    return found


def _prompt_set(store: RunReader, manifest: Mapping[str, Any]) -> str:
    spec = manifest.get("spec", {}).get("prompts", {})
    source = str(spec.get("source", ""))
    if str(spec.get("hf_config") or "").startswith("wildchat"):
        return "WildChat"
    if source in ("demo", "builtin:demo"):
        return "demo"
    if store.prompts_path.exists():
        values = pq.read_table(store.prompts_path, columns=["source"]).column(0).to_pylist()
        common = Counter(v for v in values if v).most_common(1)
        if common and common[0][0] in PROMPT_SET_NAMES:
            return PROMPT_SET_NAMES[common[0][0]]
    name = Path(source).name or source
    return re.sub(r"\.(jsonl|json|csv|parquet)(\.gz)?$", "", name) or "prompts"


def _unique_ids(paths: Sequence[Path]) -> list[str]:
    """Short unique labels: the directory name, with parents added only where names collide."""
    depth = 1
    while True:
        ids = ["/".join(p.resolve().parts[-depth:]) for p in paths]
        if len(set(ids)) == len(ids) or depth > 8:
            return ids
        depth += 1


def load_runs(paths: Iterable[str | Path], meta_file: MetaFile | None = None) -> list[RunInfo]:
    """Describe every run under ``paths``; metadata from manifests, overridden by ``meta_file``."""
    meta_file = meta_file or MetaFile()
    dirs = discover(paths)
    out: list[RunInfo] = []
    for run_id, path in zip(_unique_ids(dirs), dirs, strict=True):
        store = RunReader(path)
        try:
            manifest = store.check_readable()  # a damaged manifest or part: one line naming it and the repair
        except OSError as exc:
            raise PolytoxError(f"{store.manifest_path}: unreadable manifest ({exc})") from None
        gen = manifest.get("spec", {}).get("generation", {})
        override = meta_file.runs.get(path.name, meta_file.runs.get(run_id, {}))
        model = str(override.get("model") or gen.get("model") or "unknown")
        if gen.get("detox") and not override.get("model"):  # a detoxified run is its own leaderboard row
            from ..detox.methods import short_label

            model = f"{model} + {short_label(str(gen['detox']))}"
        meta = ModelMeta()
        if isinstance(manifest.get("model_meta"), Mapping):
            meta = parse_meta(manifest["model_meta"], f"{store.manifest_path}: model_meta")
        if model in meta_file.models:
            meta = meta.merged(meta_file.models[model])
        if override:
            meta = meta.merged(parse_meta(override, f"{meta_file.path}: runs.{path.name}"))
        default = manifest["scorer"].get("id")
        prompt_set = str(override.get("prompt_set") or manifest.get("prompt_set") or _prompt_set(store, manifest))
        out.append(
            RunInfo(
                run_id=run_id,
                path=path,
                model=model,
                backend=str(gen.get("backend", "")),
                prompt_set=prompt_set,
                scorer_ids=tuple(store.scorer_ids()),
                default_scorer=slug(default) if default else None,
                meta=meta,
                status=str(manifest.get("status", "unknown")),
                manifest=manifest,
            )
        )
    return _unify_meta(out)


def _unify_meta(runs: list[RunInfo]) -> list[RunInfo]:
    """Metadata describes a model, not a run: every run of a model gets the fields any of its runs knows.

    Two runs of one model that disagree on a field are an error (fix a manifest or set the field in the
    metadata YAML, which wins over manifests).
    """
    merged: dict[str, dict[str, Any]] = {}
    source: dict[tuple[str, str], RunInfo] = {}
    for r in runs:
        fields = merged.setdefault(r.model, {})
        for name in META_FIELDS:
            value = getattr(r.meta, name)
            if value is None:
                continue
            if name in fields and fields[name] != value:
                other = source[(r.model, name)]
                raise PolytoxError(
                    f"model {r.model!r}: runs disagree on {name}: {other.path} says {fields[name]!r}, "
                    f"{r.path} says {value!r}; fix one manifest's model_meta or set it in the metadata YAML"
                )
            fields[name] = value
            source[(r.model, name)] = r
    return [dataclasses.replace(r, meta=ModelMeta(**merged[r.model])) for r in runs]
