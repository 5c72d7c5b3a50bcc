"""Loading a local Hugging Face checkpoint for a scorer: one loader for the classifiers and the judges.

``load_pretrained`` reads the tokenizer and the model (``AutoModelForSequenceClassification`` for ``hf`` and
``detoxify``, ``AutoModelForCausalLM`` for ``llama-guard``) from a Hub id or a folder, moves it to the device
and dtype ``polytox._util.torch_device`` picked, and turns a failed load into one error a user can act on.
"""

from __future__ import annotations

from typing import Any

from ..errors import PolytoxError, require


def quiet_transformers() -> None:
    """No weight-loading progress bars or advisory warnings in the middle of a scoring progress bar."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def load_pretrained(
    auto_class: str,
    model: str,
    *,
    revision: str = "",
    device: str = "cpu",
    dtype: Any = None,
    trust_remote_code: bool = False,
    what: str,
    hint: str,
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``transformers.<auto_class>`` on ``device`` in ``dtype`` (None: as stored), in
    eval mode; a load that fails says ``could not load <what> <model>: <cause>. <hint>``."""
    transformers = require("transformers", "hf")
    require("torch", "hf")
    quiet_transformers()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision:
        kwargs["revision"] = revision
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model, **kwargs)
        loaded = getattr(transformers, auto_class).from_pretrained(model, **kwargs)
    except (OSError, ValueError) as exc:
        raise PolytoxError(f"could not load {what} {model!r}: {exc}. {hint}") from exc
    loaded = loaded.to(device=device, dtype=dtype) if dtype is not None else loaded.to(device)
    return loaded.eval(), tokenizer
