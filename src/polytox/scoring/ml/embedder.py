"""Mean-pooled hidden states of a causal LM's middle layers, batched and cached on disk.

A small multilingual LM (the embedded gemma-3-270m by default) reads each text once; the hidden state after
decoder layer ``l`` is averaged over the text's tokens (the BOS position is left out: it is an attention
sink whose huge activations carry no information about the text). A forward hook stops the model after the
deepest layer asked for, so layers above it cost nothing. Vectors go into ``EmbeddingCache`` as each batch
finishes: an interrupted extraction resumes where it stopped.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as pkg_version
from typing import Any

import numpy as np

from ..._util.onednn import use_onednn_linears
from ...errors import require
from ...models import EMBEDDED, resolve_model
from ...types import text_hash
from .attention import AttentionProbe
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


DTYPES = ("float32", "bfloat16", "auto")


def resolve_dtype(dtype: str, device: str) -> str:
    """``float32`` or ``bfloat16`` for ``dtype`` on ``device``: ``auto`` is float32 on every device.

    float32 is what keeps a text's score a function of the text: bfloat16 rounds every layer's output to
    8 bits of mantissa, so the last-bit differences between kernels picked for different batch shapes
    (another text's length widens the padding) grow into score differences of up to 0.03-0.1, while
    float32 keeps them below 1e-6 (docs/scorer-speed.md, "One value per text"). bfloat16 is there to be
    asked for (``dtype=bfloat16``), where its speed (``native_bf16``) is worth that.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return "float32" if dtype == "auto" else dtype


def native_bf16(device: str) -> bool:
    """Whether ``device`` computes bfloat16 natively (a CUDA GPU with bf16 support; a CPU with AVX512-BF16
    or AMX, where oneDNN runs bf16 matmuls about 3x faster than float32); bf16 emulated in software is
    slower than float32."""
    torch = require("torch", "hf")
    if device.startswith("cuda"):
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device == "cpu":
        native = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return native is not None and bool(native())
    return False


class HiddenStateEmbedder:
    """``embed(texts)`` -> float32 array (n, len(layers) * hidden), the per-layer mean pools side by side.

    Texts are tokenized in one fast-tokenizer call, sorted by token count and cut into batches of
    ``batch_size``, so a batch pads to its own longest text only. ``dtype`` is the backbone's compute
    dtype (pools are accumulated in float32 either way). The previous per-text path, the benchmark baseline
    and the test oracle, lives in ``benchmarks/legacy_embedder.py``.

    Thread-safe: one lock covers loading, tokenizing and the forward passes. Passes must not overlap: the
    layer hooks that read the hidden states are registered on the one shared model for the duration of
    a pass, so a second thread's pass would fire the first one's hooks (rows of another batch, or a
    shape error), and a fast tokenizer's truncation settings are per-object state. On a CPU one pass
    already uses every core, so serialising the passes costs no throughput.
    """

    def __init__(
        self,
        model: str,
        layers: Sequence[int],
        *,
        max_tokens: int = 128,
        batch_size: int = 32,
        device: str = "cpu",
        cache: EmbeddingCache | None = None,
        threads: int | None = None,
        dtype: str = "float32",
    ) -> None:
        if not layers or min(layers) < 1:
            raise ValueError(f"layers must be decoder layer numbers >= 1, got {list(layers)}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.model_name = model
        self.layers = tuple(int(x) for x in layers)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.threads = threads
        self.dtype = dtype
        self._lm: Any = None
        self._tok: Any = None
        self._lock = threading.RLock()  # loading, tokenizing, forward passes: one thread at a time
        self.computed = 0  # texts run through the model (cache misses)

    @property
    def key(self) -> str:
        """Cache identity; bfloat16 vectors get their own key, so float32 extractions stay as they were."""
        base = model_key(self.model_name, self.max_tokens)
        dtype = resolve_dtype(self.dtype, self.device)
        return base if dtype == "float32" else f"{base}|{dtype}"

    # ---- model ----------------------------------------------------------------------------------
    def _load(self) -> None:
        with self._lock:
            if self._lm is None:
                self._load_model()

    def _load_model(self) -> None:
        torch = require("torch", "hf")
        transformers = require("transformers", "hf")
        transformers.utils.logging.disable_progress_bar()
        if self.threads:
            torch.set_num_threads(self.threads)
        path, _ = resolve_model(self.model_name)
        self._tok = transformers.AutoTokenizer.from_pretrained(path)
        compute = getattr(torch, resolve_dtype(self.dtype, self.device))
        lm = transformers.AutoModel.from_pretrained(path, dtype=compute)
        lm.to(self.device).eval()
        blocks = decoder_layers(lm)
        if max(self.layers) > len(blocks):
            raise ValueError(f"{self.model_name} has {len(blocks)} layers; asked for layer {max(self.layers)}")
        if str(self.device) == "cpu" and compute == torch.float32:  # MKL's sgemm: half speed on AMD CPUs
            for block in list(blocks)[: max(self.layers)]:
                use_onednn_linears(block)
        self._blocks = blocks
        self._lm = lm

    @property
    def hidden_size(self) -> int:
        self._load()
        return int(self._lm.config.hidden_size)

    def _tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """Token ids of every text (one batched fast-tokenizer call) and their counts."""
        ids = self._tok(list(texts), truncation=True, max_length=self.max_tokens)["input_ids"]
        return ids, np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def _pad(self, ids: list[list[int]], rows: np.ndarray, lengths: np.ndarray) -> tuple[Any, Any]:
        """Right-padded id matrix and mask of ``rows`` (vectorised: one flat fill, no per-row loop)."""
        torch = require("torch", "hf")
        pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        width = max(int(lengths.max()), 1)
        mask = np.arange(width)[None, :] < lengths[:, None]
        flat = np.fromiter(
            itertools.chain.from_iterable(ids[i] for i in rows), dtype=np.int64, count=int(lengths.sum())
        )
        matrix = np.full((len(rows), width), pad, dtype=np.int64)
        matrix[mask] = flat
        return torch.from_numpy(matrix), torch.from_numpy(mask.astype(np.int64))

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[np.ndarray, Any, Any]]:
        """``texts`` tokenized in one call, sorted by token count and cut into padded batches of
        ``batch_size``: (the batch's indices into ``texts``, id matrix, mask) per batch."""
        ids, lengths = self._tokenize(texts)
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            yield (rows, *self._pad(ids, rows, lengths[rows]))

    def _keep_weight(self, ids: Any, mask: Any) -> Any:
        return keep_weight(ids, mask, self._tok.bos_token_id)

    def _run_layers(self, ids: Any, mask: Any, on_layer: Callable[[int, Any], None]) -> None:
        """One forward pass of a padded batch without gradients (``run_layers``)."""
        torch = require("torch", "hf")
        with torch.inference_mode():
            run_layers(
                self._lm,
                self._blocks,
                self.layers,
                ids.to(self.device, non_blocking=True),
                mask.to(self.device, non_blocking=True),
                on_layer,
            )

    def _forward(
        self, ids: Any, mask: Any, probes: Sequence[AttentionProbe] = ()
    ) -> tuple[dict[int, np.ndarray], np.ndarray]:
        """Mean pools (float32, (rows, hidden)) per asked layer for one padded batch, and each probe's
        scores ((rows, len(probes)) float32) from the same pass."""
        keep = self._keep_weight(ids, mask).to(self.device, non_blocking=True)
        weight = keep.unsqueeze(-1)
        denom = weight.sum(1).clamp(min=1.0)
        captured: dict[int, Any] = {}
        hidden: dict[int, Any] = {}

        def pool(layer: int, states: Any) -> None:
            captured[layer] = (states.float() * weight).sum(1) / denom
            if probes:
                hidden[layer] = states

        self._run_layers(ids, mask, pool)
        scores = np.zeros((len(ids), len(probes)), dtype=np.float32)
        for k, probe in enumerate(probes):
            scores[:, k] = probe.token_scores([hidden[layer] for layer in self.layers], keep > 0).cpu().numpy()
        return {layer: pooled.cpu().numpy() for layer, pooled in captured.items()}, scores

    def token_states(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every token's states, the tokens a mean pool reads (no padding, no leading BOS): (tokens,
        len(layers) * hidden) float16, asked layers side by side, and (len(texts) + 1,) offsets, text i
        owning rows offsets[i]:offsets[i + 1]. For token-level heads (``attention``); not cached."""
        texts = list(texts)
        self._load()
        width = len(self.layers) * self.hidden_size
        chunks: list[np.ndarray] = [np.zeros((0, width), dtype=np.float16)] * len(texts)
        with self._lock:
            for rows, batch_ids, mask in self._batches(texts) if texts else ():
                keep = self._keep_weight(batch_ids, mask).bool().numpy()
                captured: dict[int, Any] = {}
                self._run_layers(batch_ids, mask, captured.__setitem__)
                states = np.concatenate([captured[layer].float().cpu().numpy() for layer in self.layers], axis=-1)
                states = np.clip(states, -65000.0, 65000.0).astype(np.float16)  # float16's finite range
                for j, row in enumerate(rows):
                    chunks[row] = states[j][keep[j]]
        offsets = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
        return np.concatenate(chunks) if texts else np.zeros((0, width), dtype=np.float16), offsets

    # ---- public ---------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        """Embeddings of ``texts`` (cache hits are free; misses are computed in length-sorted batches).

        Each distinct text is computed once. Vectors are rounded to float16 (the cache's storage type)
        whether or not a cache is used, so cached and fresh vectors are the same numbers."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return self.embed_and_probe(texts, (), progress)[0]

    def probe_key(self, probe: AttentionProbe) -> str:
        """Cache identity of a probe's scores (stored as a one-number vector under layer 0)."""
        return f"{self.key}|attention-{probe.digest}"

    def embed_and_probe(
        self, texts: Sequence[str], probes: Sequence[AttentionProbe], progress: ProgressCallback | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``embed(texts)`` and each attention probe's score of every text ((texts, len(probes)) float32,
        rounded to float16 like the pools) from the same forward pass. A text is a cache hit only when its
        pools and every probe's score are cached."""
        texts = list(texts)
        position: dict[str, int] = {}
        inverse = np.fromiter((position.setdefault(t, len(position)) for t in texts), dtype=np.int64, count=len(texts))
        unique = list(position)
        pools: dict[int, np.ndarray] = {}
        scores = np.zeros((len(unique), len(probes)), dtype=np.float16)
        todo = np.arange(len(unique))
        pooled = np.zeros(len(unique), dtype=bool)  # pools found in the cache
        hashes: list[str] = []
        if self.cache is not None and unique:
            hashes = [text_hash(t) for t in unique]
            found = {layer: self.cache.get_many(self.key, layer, hashes) for layer in self.layers}
            found_probe = [self.cache.get_many(self.probe_key(probe), 0, hashes) for probe in probes]
            pooled = np.fromiter(
                (all(h in found[layer] for layer in self.layers) for h in hashes), dtype=bool, count=len(hashes)
            )
            hit = pooled & np.fromiter(
                (all(h in f for f in found_probe) for h in hashes), dtype=bool, count=len(hashes)
            )
            for i in np.flatnonzero(pooled):
                for layer in self.layers:
                    vec = found[layer][hashes[i]]
                    pools.setdefault(layer, np.zeros((len(unique), vec.shape[0]), dtype=np.float16))[i] = vec
            for i in np.flatnonzero(hit):
                for k, f in enumerate(found_probe):
                    scores[i, k] = f[hashes[i]][0]
            todo = np.flatnonzero(~hit)
        if len(todo):
            self._load()
            for layer in self.layers:
                pools.setdefault(layer, np.zeros((len(unique), self.hidden_size), dtype=np.float16))
            with self._lock:
                done = 0
                for chunk, batch_ids, mask in self._batches([unique[i] for i in todo]):
                    batch, batch_scores = self._forward(batch_ids, mask, probes)
                    rows = todo[chunk]
                    # cached pools stay as they are: a recomputation in another batch can differ in the last bit
                    new = ~pooled[rows]
                    for layer in self.layers:
                        pools[layer][rows[new]] = batch[layer][new]
                    scores[rows] = batch_scores
                    if self.cache is not None:
                        self.cache.put_many(
                            self.key, [(layer, hashes[r], pools[layer][r]) for layer in self.layers for r in rows[new]]
                        )
                        for k, probe in enumerate(probes):
                            self.cache.put_many(
                                self.probe_key(probe), [(0, hashes[r], scores[r, k : k + 1]) for r in rows]
                            )
                    self.computed += len(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, len(todo))
        if not unique:
            return np.zeros((0, 0), dtype=np.float32), np.zeros((0, len(probes)), dtype=np.float32)
        return (
            np.concatenate([pools[layer] for layer in self.layers], axis=1)[inverse].astype(np.float32),
            scores[inverse].astype(np.float32),
        )

    def close(self) -> None:
        with self._lock:
            self._lm = None
            self._tok = None


def keep_weight(ids: Any, mask: Any, bos: int | None) -> Any:
    """(rows, width) float32: 1 for the tokens a pool reads, 0 for padding and a leading BOS (kept when it
    is the text's only token)."""
    torch = require("torch", "hf")
    weight = mask.to(torch.float32)
    if bos is not None:  # drop the BOS position of texts that have more than the BOS token
        weight[:, 0] *= ~((ids[:, 0] == bos) & (mask.sum(1) > 1))
    return weight


def run_layers(
    model: Any, blocks: Any, layers: Sequence[int], ids: Any, mask: Any, on_layer: Callable[[int, Any], None]
) -> None:
    """One forward pass of a padded batch (``ids`` and ``mask`` on the model's device), calling
    ``on_layer(layer, hidden)`` with each asked layer's output (layer L: block L-1's) as it is computed; the
    pass stops after the deepest asked layer. Gradients follow the caller's mode (the LoRA trial trains
    through it; the embedder calls it under ``inference_mode``)."""
    deepest = max(layers)

    def hook_for(layer: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            on_layer(layer, output[0] if isinstance(output, tuple | list) else output)
            if layer == deepest:
                raise _Stop

        return hook

    handles = [blocks[layer - 1].register_forward_hook(hook_for(layer)) for layer in layers]
    try:
        model(input_ids=ids, attention_mask=mask, use_cache=False)
    except _Stop:
        pass
    finally:
        for handle in handles:
            handle.remove()


def decoder_layers(model: Any) -> Any:
    """The list of decoder blocks of a transformers base model (``layers``, GPT-2's ``h``, ...)."""
    for owner in (model, getattr(model, "model", None), getattr(model, "language_model", None)):
        if owner is None:
            continue
        for name in ("layers", "h", "blocks"):
            blocks = getattr(owner, name, None)
            if blocks is not None and hasattr(blocks, "__len__"):
                return blocks
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")
