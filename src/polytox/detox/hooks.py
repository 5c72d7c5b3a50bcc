"""The hooks ``polytox.detox`` provides to the layers below it, registered in ``polytox.registry`` on import.

``detox.canonical`` gives the spec one spelling of a ``--detox`` string (its hash names the run);
``detox.check`` refuses, before any work, a method missing a required option; ``detox.adjuster`` builds the
transformers backend's decoding hook; ``detox.vllm_sampling`` and ``detox.vllm_bad_words`` map the word
filter onto vLLM. Each imports its module on first call, so importing ``polytox.detox`` stays light.
"""

from __future__ import annotations

from typing import Any

from ..registry import register_hook


def _canonical(value: str) -> str:
    from .methods import canonical_detox

    return canonical_detox(value)


def _check(value: str) -> None:
    from .methods import check_detox

    check_detox(value)


def _adjuster(spec: Any, generator: Any) -> Any:
    from .methods import build_adjuster

    return build_adjuster(spec, generator)


def _vllm_sampling(detox: str) -> dict[str, list[str]]:
    from .vllm_map import vllm_sampling_extras

    return vllm_sampling_extras(detox)


def _vllm_bad_words(detox: str, tokenizer: Any) -> list[list[int]]:
    from .vllm_map import bad_word_sequences

    return bad_word_sequences(detox, tokenizer)


register_hook("detox.canonical", _canonical)
register_hook("detox.check", _check)
register_hook("detox.adjuster", _adjuster)
register_hook("detox.vllm_sampling", _vllm_sampling)
register_hook("detox.vllm_bad_words", _vllm_bad_words)
