"""Name -> factory registries for generators and scorers, and the hooks a capability provides to lower layers.

Built-ins are lazy ``"module:attr"`` strings, so ``import polytox`` imports no heavy dependency.
Plugins register through the entry-point groups ``polytox.generators`` and ``polytox.scorers``.
An unknown name fails with the list of known names and a "did you mean".

Hooks keep the layers pointing down: a capability (``polytox.detox``) registers functions by name when it is
imported, and the layers below it (the spec, the generation backends) call them through ``hook`` without
importing it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from .errors import PolytoxError

GENERATORS: dict[str, str] = {
    "fake": "polytox.generation.fake:FakeGenerator",
    "transformers": "polytox.generation.hf:TransformersGenerator",
    "vllm": "polytox.generation.vllm_backend:VLLMGenerator",
    "openai": "polytox.generation.openai_backend:OpenAIGenerator",
}

SCORERS: dict[str, str] = {
    "fake": "polytox.scoring.fake:FakeScorer",
    "svm": "polytox.scoring.svm:SvmScorer",
    "perspective": "polytox.scoring.perspective:PerspectiveScorer",
    "lexicon": "polytox.scoring.lexicon:LexiconScorer",
    "hf": "polytox.scoring.hf_classifier:HfClassifierScorer",
    "detoxify": "polytox.scoring.detoxify_scorer:DetoxifyScorer",
    "llama-guard": "polytox.scoring.safety_judge:LlamaGuardScorer",
    "polytox-ml": "polytox.scoring.ml.scorer:PolytoxMlScorer",
    "default": "polytox.scoring.default:DefaultScorer",
}

_GROUPS = {"generator": ("polytox.generators", GENERATORS), "scorer": ("polytox.scorers", SCORERS)}


# Registered at run time (tests, notebooks): kept apart, so the built-in tables list polytox's own only.
_RUNTIME: dict[str, dict[str, str | Callable[..., Any]]] = {"generator": {}, "scorer": {}}


def _table(kind: str) -> dict[str, str | Callable[..., Any]]:
    group, builtins = _GROUPS[kind]
    table: dict[str, str | Callable[..., Any]] = {**builtins, **_RUNTIME[kind]}
    for ep in entry_points(group=group):
        table.setdefault(ep.name, ep.value)
    return table


def names(kind: str) -> list[str]:
    """Registered names of a kind (``generator`` or ``scorer``), built-ins and plugins."""
    return sorted(_table(kind))


def register(kind: str, name: str, target: str) -> None:
    """Register ``name`` -> ``"module:attr"`` at run time (tests, notebooks)."""
    _RUNTIME[kind][name] = target  # an unknown kind fails here (KeyError, as before)


def unregister(kind: str, name: str) -> None:
    """Drop a run-time registration (a no-op for names never registered)."""
    _RUNTIME[kind].pop(name, None)


def resolve(kind: str, name: str) -> Callable[..., Any]:
    """The factory registered under ``name``; unknown names raise with suggestions."""
    table = _table(kind)
    if name not in table:
        close = difflib.get_close_matches(name, table, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise PolytoxError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(sorted(table))}.")
    target = table[name]
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj  # type: ignore[return-value]


# Hook group -> the package whose import registers that group's hooks. ``hook`` imports it when a hook of the
# group is asked for before anything imported it, so every caller gets the same function (a spec built
# straight from ``polytox.spec_from_flat`` canonicalises ``--detox`` exactly as one built by the CLI).
HOOK_PROVIDERS: dict[str, str] = {"detox": "polytox.detox"}

_HOOKS: dict[str, Callable[..., Any]] = {}


def register_hook(name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as hook ``name`` (``GROUP.NAME``, e.g. ``detox.canonical``); a later one replaces it."""
    _HOOKS[name] = fn


def hook(name: str) -> Callable[..., Any]:
    """The function registered as hook ``name``, importing its group's provider first when needed."""
    if name not in _HOOKS:
        provider = HOOK_PROVIDERS.get(name.partition(".")[0])
        if provider is not None:
            importlib.import_module(provider)
    if name not in _HOOKS:
        raise PolytoxError(f"no hook {name!r} is registered; known: {', '.join(sorted(_HOOKS)) or 'none'}")
    return _HOOKS[name]
