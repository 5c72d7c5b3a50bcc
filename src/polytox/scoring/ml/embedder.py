"""Mean-pooled hidden states of a causal LM's middle layers, batched and cached on disk.

A small multilingual LM (the embedded gemma-3-270m by default) reads each text once; the hidden state after
decoder layer ``l`` is averaged over the text's tokens (the BOS position is left out: it is an attention
sink whose huge activations carry no information about the text). A forward hook stops the model after the
deepest layer asked for, so layers above it cost nothing. Vectors go into ``EmbeddingCache`` as each batch
finishes: an interrupted extraction resumes where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as pkg_version
from typing import Any

import numpy as np

from ...errors import require
from ...models import EMBEDDED, resolve_model
from ...types import text_hash
from .embed_cache import EmbeddingCache

log = logging.getLogger("polytox")

ProgressCallback = Callable[[int, int], None]  # (texts done, total)


class _Stop(Exception):
    """Raised by the hook on the deepest needed layer: the rest of the network is skipped."""


def model_key(model: str, max_tokens: int) -> str:
    """Cache identity of an embedding model: name (+ wheel version for embedded ones), pooling, length cap."""
    embedded = EMBEDDED.get(model)
    version = ""
    if embedded is not None:
        try:
            version = "@" + pkg_version(embedded.package.replace("_", "-"))
        except PackageNotFoundError:
            version = ""
    return f"{model}{version}|mean-nobos|t{max_tokens}"


class HiddenStateEmbedder:
    """``embed(texts)`` -> float32 array (n, len(layers) * hidden), the per-layer mean pools side by side."""

    def __init__(self, model: str, layers: Sequence[int], *, max_tokens: int = 128, batch_size: int = 32,
                 device: str = "cpu", cache: EmbeddingCache | None = None, threads: int | None = None) -> None:
        if not layers or min(layers) < 1:
            raise ValueError(f"layers must be decoder layer numbers >= 1, got {list(layers)}")
        self.model_name = model
        self.layers = tuple(int(x) for x in layers)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.threads = threads
        self.key = model_key(model, max_tokens)
        self._lm: Any = None
        self._tok: Any = None
        self.computed = 0  # texts run through the model (cache misses)

    # ---- model ----------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._lm is not None:
            return
        torch = require("torch", "hf")
        transformers = require("transformers", "hf")
        transformers.utils.logging.disable_progress_bar()
        if self.threads:
            torch.set_num_threads(self.threads)
        path, _ = resolve_model(self.model_name)
        self._tok = transformers.AutoTokenizer.from_pretrained(path)
        lm = transformers.AutoModel.from_pretrained(path, dtype=torch.float32)
        lm.to(self.device).eval()
        blocks = _decoder_layers(lm)
        if max(self.layers) > len(blocks):
            raise ValueError(f"{self.model_name} has {len(blocks)} layers; asked for layer {max(self.layers)}")
        self._blocks = blocks
        self._lm = lm

    @property
    def hidden_size(self) -> int:
        self._load()
        return int(self._lm.config.hidden_size)

    def _encode(self, text: str) -> list[int]:
        ids = list(self._tok(text, truncation=True, max_length=self.max_tokens)["input_ids"])
        return ids

    def _forward(self, batch: list[list[int]]) -> dict[int, np.ndarray]:
        """Mean pools per asked layer for one batch of token id lists."""
        torch = require("torch", "hf")
        pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        bos = self._tok.bos_token_id
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        weight = mask.clone().float()
        for row, seq in enumerate(batch):
            if bos is not None and len(seq) > 1 and seq[0] == bos:
                weight[row, 0] = 0.0
        weight = weight.unsqueeze(-1).to(self.device)
        denom = weight.sum(1).clamp(min=1.0)
        captured: dict[int, Any] = {}
        deepest = max(self.layers)
        handles = []

        def hook_for(layer: int) -> Callable[..., None]:
            def hook(_module: Any, _inputs: Any, output: Any) -> None:
                hidden = output[0] if isinstance(output, tuple | list) else output
                captured[layer] = ((hidden.float() * weight).sum(1) / denom).cpu().numpy()
                if layer == deepest:
                    raise _Stop

            return hook

        for layer in self.layers:
            handles.append(self._blocks[layer - 1].register_forward_hook(hook_for(layer)))
        try:
            with torch.inference_mode():
                self._lm(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=False)
        except _Stop:
            pass
        finally:
            for handle in handles:
                handle.remove()
        return captured

    # ---- public ---------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        """Embeddings of ``texts`` (cache hits are free; misses are computed in length-sorted batches)."""
        hashes = [text_hash(t) for t in texts]
        unique = list(dict.fromkeys(hashes))
        vectors: dict[int, dict[str, np.ndarray]] = {layer: {} for layer in self.layers}
        if self.cache is not None:
            for layer in self.layers:
                vectors[layer] = self.cache.get_many(self.key, layer, unique)
        missing = [h for h in unique if any(h not in vectors[layer] for layer in self.layers)]
        if missing:
            self._load()
            first = {h: i for i, h in reversed(list(enumerate(hashes)))}
            encoded = {h: self._encode(texts[first[h]]) for h in missing}
            order = sorted(missing, key=lambda h: len(encoded[h]))
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                pools = self._forward([encoded[h] for h in chunk])
                rows = []
                for layer in self.layers:
                    for h, vec in zip(chunk, pools[layer], strict=True):
                        vec16 = vec.astype(np.float16)
                        vectors[layer][h] = vec16
                        rows.append((layer, h, vec16))
                if self.cache is not None:
                    self.cache.put_many(self.key, rows)
                self.computed += len(chunk)
                if progress is not None:
                    progress(min(start + len(chunk), len(order)), len(order))
        out = np.stack([np.concatenate([vectors[layer][h] for layer in self.layers]) for h in hashes]) if hashes \
            else np.zeros((0, 0), dtype=np.float32)
        return out.astype(np.float32)

    def close(self) -> None:
        self._lm = None
        self._tok = None


def _decoder_layers(model: Any) -> Any:
    """The list of decoder blocks of a transformers base model (``layers``, GPT-2's ``h``, ...)."""
    for owner in (model, getattr(model, "model", None), getattr(model, "language_model", None)):
        if owner is None:
            continue
        for name in ("layers", "h", "blocks"):
            blocks = getattr(owner, name, None)
            if blocks is not None and hasattr(blocks, "__len__"):
                return blocks
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")
