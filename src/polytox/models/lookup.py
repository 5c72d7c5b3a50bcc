"""Check that a model name can be loaded before loading it, so a wrong name is one clear error.

A model name is tried as (1) an embedded alias (``polytox.models.EMBEDDED``), (2) a local folder, (3) a
Hugging Face hub id. When none works, the message says what was tried and what to do: a folder that is not
a model names the files it lacks; a hub id says whether the hub could not be reached (offline, no network:
then the id may well exist) or answered that there is no such model; a name close to an embedded alias gets
a "did you mean". The hub is asked once for the id's ``config.json`` (no retries: a closed network fails
in well under a second), after the local cache, so a cached model keeps working offline.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
from pathlib import Path

from .._util.options import TRUE_WORDS
from ..errors import MissingDependencyError, PolytoxError

# Files a transformers model folder needs (what ``from_pretrained`` reads), as (what, glob patterns).
CONFIG_FILES = ("config.json",)
WEIGHT_FILES = (
    "*.safetensors",
    "pytorch_model*.bin",
    "model.safetensors.index.json",
    "tf_model.h5",
    "flax_model.msgpack",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece*.model",
)
HUB_TIMEOUT_S = 10.0  # one HEAD request for config.json


def aliases() -> list[str]:
    from .embedded import EMBEDDED

    return sorted(EMBEDDED)


def alias_hint(name: str) -> str:
    """``did you mean 'x'? `` for a near miss of an embedded alias, then the aliases (which work offline)."""
    close = difflib.get_close_matches(name.lower(), aliases(), n=1, cutoff=0.6)
    mean = f"did you mean {close[0]!r}? " if close else ""
    return f"{mean}embedded aliases (no download): {', '.join(aliases())}"


def looks_like_path(name: str) -> bool:
    """A name meant as a local path (hub ids are ``name`` or ``owner/name``)."""
    return (
        name.startswith(("/", "./", "../", "~", ".\\"))
        or name in (".", "..")
        or name.count("/") > 1
        or "\\" in name
        or name.endswith("/")
    )


def missing_model_files(folder: Path) -> list[str]:
    """What a transformers model folder lacks: config, weights, tokenizer (empty list: looks loadable)."""

    def has(patterns: tuple[str, ...]) -> bool:
        return any(next(folder.glob(p), None) is not None for p in patterns)

    missing = []
    if not has(CONFIG_FILES):
        missing.append("config.json")
    if not has(WEIGHT_FILES):
        missing.append("weights (*.safetensors, pytorch_model*.bin)")
    if not has(TOKENIZER_FILES):
        missing.append("tokenizer files (tokenizer.json, tokenizer.model, vocab.json)")
    return missing


def check_folder(name: str, folder: Path) -> None:
    if not folder.is_dir():
        raise PolytoxError(
            f"model {name!r} is a file, not a model folder: pass the folder that holds "
            f"config.json, the weights and the tokenizer (or a hub id; {alias_hint(name)})"
        )
    missing = missing_model_files(folder)
    if missing:
        gguf = (
            " (a GGUF file alone is not loadable: convert it with transformers first)"
            if next(folder.glob("*.gguf"), None) is not None
            else ""
        )
        raise PolytoxError(
            f"model folder {name!r} is not a transformers model: it lacks {'; '.join(missing)}"
            f"{gguf}; save one with save_pretrained (model and tokenizer), or pass a hub id or "
            f"an embedded alias ({alias_hint(name)})"
        )


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level exception classes of the HTTP clients huggingface_hub may use."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, attrs in (
        ("httpx2", ("TransportError",)),
        ("httpx", ("TransportError",)),
        ("requests", ("ConnectionError", "Timeout")),
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        found.extend(getattr(mod, a) for a in attrs if isinstance(getattr(mod, a, None), type))
    return tuple(found)


def hub_failure(name: str, exc: BaseException) -> str | None:
    """The message for a hub lookup of ``name`` that raised ``exc``, or None when ``exc`` is not a lookup
    failure (then it is a bug and keeps its traceback). Tells "unreachable" from "no such id"."""
    from huggingface_hub import errors as hub

    tried = f"model {name!r} is not a local folder or an embedded alias"
    if isinstance(exc, hub.GatedRepoError):
        return (
            f"{tried}, and {name!r} is a gated model on the Hugging Face hub: accept its terms on "
            f"https://huggingface.co/{name} and log in (hf auth login, or set HF_TOKEN)"
        )
    if isinstance(exc, hub.RepositoryNotFoundError):
        return (
            f"{tried}, and the Hugging Face hub has no model {name!r} (check the spelling; a private "
            f"model needs HF_TOKEN); {alias_hint(name)}"
        )
    if isinstance(exc, hub.RevisionNotFoundError):
        return f"{tried}, and the Hugging Face hub has no such revision of {name!r}"
    if isinstance(exc, hub.OfflineModeIsEnabled) or _offline():
        return (
            f"{tried}, and offline mode is on (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1) with no copy of "
            f"{name!r} in the local cache: unset it, pass a downloaded model folder, or use an embedded alias; "
            f"{alias_hint(name)}"
        )
    if isinstance(exc, (hub.LocalEntryNotFoundError, *_transport_errors())):
        cause = exc.__cause__ or exc.__context__
        reason = cause if cause is not None and not isinstance(exc, _transport_errors()) else exc
        unreachable = f"cannot be reached ({type(reason).__name__}: {str(reason).splitlines()[0][:160]})"
    elif isinstance(exc, hub.EntryNotFoundError):  # the repository exists, without a config.json
        return (
            f"{tried}, and the Hugging Face hub repository {name!r} has no config.json: it is not a transformers model"
        )
    elif isinstance(exc, hub.HfHubHTTPError):
        unreachable = f"answered HTTP {getattr(getattr(exc, 'response', None), 'status_code', '?')}"
    else:
        return None
    return (
        f"{tried}, and the Hugging Face hub {unreachable}, with no copy of {name!r} in the local cache "
        f"(whether the hub knows the id is unknown): connect and retry, pass a downloaded model folder, "
        f"or use an embedded alias; {alias_hint(name)}"
    )


def _offline() -> bool:
    """huggingface_hub's offline mode (``HF_HUB_OFFLINE``), or transformers' own (``TRANSFORMERS_OFFLINE``)."""
    if os.environ.get("TRANSFORMERS_OFFLINE", "").strip().lower() in TRUE_WORDS:
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(constants.HF_HUB_OFFLINE)


def check_hub(name: str) -> None:
    """``name`` is a hub id in the local cache, or one the hub knows; else a clear error."""
    try:
        hub = importlib.import_module("huggingface_hub")
        from huggingface_hub.errors import HFValidationError, OfflineModeIsEnabled
        from huggingface_hub.utils import validate_repo_id
    except ImportError as exc:
        raise MissingDependencyError(
            f"model {name!r} is not a local folder or an embedded alias, and looking it "
            f"up on the Hugging Face hub needs huggingface_hub: pip install "
            f"'polytox[hf]' ({alias_hint(name)})"
        ) from exc
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise PolytoxError(
            f"model {name!r} is not a local folder, an embedded alias or a valid hub id "
            f"(owner/name); {alias_hint(name)}"
        ) from None
    if isinstance(hub.try_to_load_from_cache(name, CONFIG_FILES[0]), str):
        return
    if _offline():  # no request at all
        raise PolytoxError(hub_failure(name, OfflineModeIsEnabled("offline")) or "offline")
    try:
        hub.get_hf_file_metadata(hub.hf_hub_url(name, CONFIG_FILES[0]), timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # classified below; anything else is re-raised unchanged
        message = hub_failure(name, exc)
        if message is None:
            raise
        raise PolytoxError(message) from exc


def check_model(name: str) -> None:
    """Raise one clear ``PolytoxError`` when ``name`` is neither an embedded alias (with its wheel), nor a
    model folder, nor a hub id that is cached or known to the hub."""
    from .embedded import EMBEDDED

    if not name or not name.strip():
        raise PolytoxError(f"the model name is empty; {alias_hint('')}")
    embedded = EMBEDDED.get(name)
    if embedded is not None:
        from .embedded import converted

        if converted(embedded) is None and importlib.util.find_spec(embedded.package) is None:
            raise MissingDependencyError(f"embedded model {name!r} needs its wheel: {embedded.install}")
        return
    path = Path(os.path.expanduser(name))
    if path.exists():
        check_folder(name, path)
        return
    if looks_like_path(name):
        raise PolytoxError(
            f"model {name!r}: no such folder (and not an embedded alias or a hub id); {alias_hint(name)}"
        )
    check_hub(name)
