"""One run's settings resolved: a YAML config, the flags or keywords given, ``retry_failed`` and
``generations_from`` become one ``EvalSpec`` and one ``ExecutorConfig``.

``polytox eval`` (``cli.eval_cmd``) and ``polytox.evaluate`` both call ``resolve_run``, so a config file, a
flag and a keyword mean the same, and a bad value is the same line wherever it came from (a value read
from the config is reported at its ``FILE:LINE``). The keys are the rows of ``polytox.settings.TABLE``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings as S
from .._util.yamlfile import YamlMapping
from ..errors import BadValueError, PolytoxError
from ..executors import ExecutorConfig
from ..spec import PRESETS, EvalSpec, read_config, spec_from_flat


@dataclass(frozen=True)
class Resolved:
    """What a run is made of: the spec (what), the executor (how) and the run directory (where)."""

    spec: EvalSpec
    executor: ExecutorConfig
    out: str


def resolve_out(out: str | Path | None, retry_failed: bool | str | None) -> str:
    """The run directory: ``out``, or the one ``retry_failed`` names (``--retry-failed OUT``); both must agree."""
    named = str(retry_failed) if isinstance(retry_failed, str | Path) else None
    given = str(out) if out is not None else None
    if named is not None and given is not None and named != given:
        raise PolytoxError(f"--retry-failed {named} and --out {given} name different run directories")
    chosen = given or named
    if chosen is None:
        raise PolytoxError("polytox eval needs --out DIR (the run directory)")
    return chosen


def executor_config(flat: dict[str, Any], given: Mapping[str, Any]) -> ExecutorConfig:
    """Pop the execution keys out of ``flat`` (a YAML config's keys) and overlay ``given`` (flags, keywords);
    each value is converted and checked by its row of the settings table (``ExecutorConfig`` refuses a value
    outside it), so a bad one is refused before the run directory is opened."""
    values = {key: flat.pop(key) for key in S.EXECUTOR_KEYS if key in flat}
    values.update({key: given[key] for key in S.EXECUTOR_KEYS if given.get(key) is not None})
    fields = {S.BY_KEY[key].name: S.BY_KEY[key].convert(value) for key, value in values.items() if value is not None}
    return ExecutorConfig(**fields)


def command_settings(given: Mapping[str, Any], config: str | Path | None) -> dict[str, Any]:
    """What only ``polytox eval`` reads (``out``, ``max_failed``, ``verify``): each given value, else the
    config's, else its row's default, converted by its row."""
    loaded = read_config(str(config), S.CONFIG_KEYS).data if config is not None else {}
    chosen = {key: S.BY_KEY[key].default for key in S.COMMAND_KEYS}
    chosen.update({key: loaded[key] for key in S.COMMAND_KEYS if loaded.get(key) is not None})
    chosen.update({key: given[key] for key in S.COMMAND_KEYS if given.get(key) is not None})
    return {key: S.BY_KEY[key].convert(value) if value is not None else None for key, value in chosen.items()}


def source_spec(path: str | Path, flat: dict[str, Any]) -> EvalSpec:
    """``generations_from`` without a config: the source run's stored spec, with each field a flag or keyword
    names replaced by its value (converted as a fresh spec would convert it; ``model`` sets the backend too)."""
    from ..executors.adopt import source_run

    data = source_run(str(path)).spec().to_dict()
    if not flat:
        return EvalSpec.from_dict(data)
    given = spec_from_flat(flat).to_dict()  # an unknown preset or bad value fails here, clearly
    places = [(S.BY_KEY[key].section, S.BY_KEY[key].name) for key in flat]
    if "model" in flat:
        places.append(("generation", "backend"))
    if "scorer" in flat:
        places.append(("scorer", "options"))  # another scorer starts from its own options, not RUN's
    if "preset" in flat:
        places += [("generation", name) for name in PRESETS[flat["preset"]]]
    for section, name in places:
        if section:
            data[section][name] = given[section][name]
        else:
            data[name] = given[name]
    return EvalSpec.from_dict(data)


def _spec(
    flat: dict[str, Any], config: YamlMapping | None, out: str, retry_failed: bool, generations_from: str | None
) -> EvalSpec:
    """The spec of the merged keys; with none, the spec stored in ``out`` (a resume or a retry)."""
    if not flat and config is None:
        from ..store.reader import RunReader

        store = RunReader(out)
        if retry_failed:
            return store.spec()
        # ``eval --out RUN`` alone resumes (and repairs) RUN with the spec it recorded
        if not generations_from and (store.exists() or store.recorded_spec()):
            return store.spec()
    if generations_from and config is None:
        return source_spec(generations_from, flat)
    return spec_from_flat(flat)


def resolve_run(
    given: Mapping[str, Any],
    *,
    config: str | Path | None = None,
    out: str | Path | None = None,
    retry_failed: bool | str | None = None,
    generations_from: str | Path | None = None,
) -> Resolved:
    """The spec, executor and run directory of one ``polytox eval`` / ``polytox.evaluate`` call.

    Args:
        given: settings by their table key (flags or keywords); None means not given. They override the
            config's keys.
        config: a YAML file of the same keys (``--config``); its ``out`` is the run directory when ``out`` is
            None, and ``max_failed`` (the command's exit code) is not read here.
        out: the run directory (``--out``).
        retry_failed: True (or the run directory) to regenerate the failed samples of an existing run; with
            neither a config nor a spec setting, its stored spec is used.
        generations_from: a run whose stored generations are scored; without a config, its spec is taken and
            the settings given override it.

    Raises:
        PolytoxError: an unknown key, a bad value (at its ``FILE:LINE`` when the config holds it), no run
            directory, or ``retry_failed`` on a directory that holds no run.
    """
    loaded = read_config(str(config), S.CONFIG_KEYS) if config is not None else None
    flat: dict[str, Any] = dict(loaded.data) if loaded else {}
    command = {key: flat.pop(key) for key in S.COMMAND_KEYS if key in flat}
    if command.get("verify") is not None and S.BY_KEY["verify"].convert(command["verify"]):
        raise PolytoxError("verify is a key of polytox eval (a check of a stored run, not a run); remove it")
    run_dir = resolve_out(out if out is not None else command.get("out"), retry_failed)
    retry = bool(retry_failed)
    if retry:
        from ..store.reader import RunReader

        if not RunReader(run_dir).exists():
            raise PolytoxError(
                f"--retry-failed: {run_dir} is not a run directory (no manifest.json), so there is "
                "nothing to retry; start the run without --retry-failed"
            )
    source = str(generations_from) if generations_from is not None else None
    from_given = {key for key in S.CONFIG_KEYS if given.get(key) is not None}
    try:
        executor = executor_config(flat, given)
        flat.update({key: given[key] for key in from_given if key in S.SPEC_KEYS})
        return Resolved(_spec(flat, loaded, run_dir, retry, source), executor, run_dir)
    except BadValueError as exc:
        # the error names a key or a spec field; point at the config line it came from
        keys = [k for k in (exc.key, *(s.key for s in S.TABLE if s.name == exc.key)) if k]
        found = next((k for k in keys if loaded is not None and k in loaded.data and k not in from_given), None)
        if loaded is None or found is None:
            raise
        raise BadValueError(f"{loaded.where(found)}: {exc}", exc.key) from exc


def with_spec(spec: EvalSpec, given: Mapping[str, Any], out: str | Path | None, retry_failed: bool) -> Resolved:
    """A complete ``EvalSpec`` in place of the settings: only execution keys may be given beside it."""
    if any(given.get(key) is not None for key in S.SPEC_KEYS):
        raise PolytoxError("evaluate() takes a spec or keyword options (and config), not both")
    return Resolved(spec.validate(), executor_config({}, given), resolve_out(out, retry_failed))


__all__ = ["Resolved", "command_settings", "executor_config", "resolve_out", "resolve_run", "source_spec", "with_spec"]
