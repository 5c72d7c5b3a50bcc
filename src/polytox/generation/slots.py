"""A KV cache of fixed row slots, each with its own write column, for continuous batching.

Transformers' caches share one write position across the batch, so a batch of prompts is left-padded
and every row grows in lock step. Here each row (slot) holds one sample's sequence left-aligned from
column 0 and writes its next key/value at its own column ``col[row]``. A finished row can therefore be
refilled with a new prompt at any step without moving the other rows, and a decoding step reads only
the columns filled so far (``[0, hi)``, ``hi`` = the longest live row + 1), never the unfilled tail.

Decode-time attention is computed by ``decode_attention``: the query heads of each key/value group are
packed into the query-length axis (one query token per row), so grouped-query attention runs on the
key/value heads as stored, with no head repetition and with a per-row padding mask. On CUDA the SDPA
kernel is chosen per decode shape (``attention_plan.py``). It is registered with transformers as
``polytox_sdpa`` and falls back to transformers' own SDPA path for prefill.
"""

from __future__ import annotations

import itertools
from typing import Any

from .attention_plan import backend_order, decode_kernel

ATTN_NAME = "polytox_sdpa"
ATTENTION_ATTR = "polytox_attention"  # set on attention modules by the backend's ``attention`` option
_ALLOCATIONS = itertools.count(1)  # a serial number per set of cache buffers (captured graphs check it)


def bucket_length(n: int, floor: int) -> int:
    """``n`` rounded up to ``floor`` or to the next ``m * 2**k`` with ``m`` in 4..8 (quarter-octave steps).

    Read lengths and cache capacities take few values this way (four per doubling, at most 25% over
    ``n``), so a compiled or graph-captured decode step meets few shapes whatever the prompt lengths.
    """
    if n <= floor:
        return floor
    step = 1 << max(0, n.bit_length() - 3)
    return -(-n // step) * step


def decode_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """SDPA for one query token per row over ``[R, Hkv, S, D]`` keys without repeating them per query head.

    Prefill (several query tokens) is delegated to transformers' ``sdpa_attention_forward`` unchanged.
    Returns ``[R, 1, H, D]`` like transformers' attention functions.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if q_len != 1 or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,  # type: ignore[no-any-return]
            scaling=scaling,
            **kwargs,
        )
    group = heads // kv_heads
    q = query.reshape(rows, kv_heads, group, dim)  # the group's query heads become query positions
    mask = attention_mask
    if mask is not None and mask.dim() == 4 and mask.shape[1] != 1:
        raise ValueError("decode_attention expects a mask shared by all heads ([R, 1, 1, S])")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    kernel = decode_kernel(rows, int(key.shape[2]), query.device.type, getattr(module, ATTENTION_ATTR, "auto"))
    if kernel is None:
        out = sdpa(q, key, value, attn_mask=mask, dropout_p=0.0, scale=scaling)
    else:
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(backend_order(kernel), set_priority=True):
            out = sdpa(q, key, value, attn_mask=mask, dropout_p=0.0, scale=scaling)
    return out.reshape(rows, heads, 1, dim).transpose(1, 2).contiguous(), None


def register_attention() -> str:
    """Register ``decode_attention`` (and SDPA's mask builder) with transformers under ``ATTN_NAME``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTN_NAME, decode_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_NAME, sdpa_mask)
    return ATTN_NAME


def _cache_base() -> Any:
    from transformers.cache_utils import Cache

    return Cache


class SlotCache(_cache_base()):  # type: ignore[misc]
    """Per-layer ``[rows, kv_heads, capacity, head_dim]`` keys and values plus a write column per row.

    ``col`` (device, ``[rows]``) is where each row's next token goes; ``hi`` (host int) is how many
    columns the next step reads. Both are set by the decoder before each forward pass. A cache may be
    reused by later decode calls (``reset``): its buffers keep their addresses, so compiled or captured
    decode steps stay valid.
    """

    def __init__(self, n_layers: int, rows: int, capacity: int, device: Any) -> None:
        super().__init__(layers=[])
        import torch

        self.n_layers = n_layers
        self.rows = rows
        self.capacity = capacity
        self.device = device
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.col = torch.zeros(rows, dtype=torch.long, device=device)
        self.hi = 1
        self._row_index = torch.arange(rows, device=device)
        self.allocation = next(_ALLOCATIONS)

    def __len__(self) -> int:
        return self.n_layers

    def reset(self) -> None:
        """Ready for a new decode call: every row empty (stale keys stay but are masked out)."""
        self.col.zero_()
        self.hi = 1

    def nbytes(self) -> int:
        """Bytes its key and value buffers hold (0 before the first fill allocates them)."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def fits(self, rows: int, capacity: int) -> bool:
        """Whether a decode call needing ``rows`` rows of ``capacity`` columns can reuse this cache."""
        return self.rows == rows and self.capacity >= capacity and len(self._row_index) == rows

    def _allocate(self, like: Any) -> None:
        import torch

        _, kv_heads, _, dim = like.shape
        shape = (self.rows, kv_heads, self.capacity, dim)
        for _ in range(self.n_layers):
            k = torch.zeros(shape, dtype=like.dtype, device=self.device)
            v = torch.zeros(shape, dtype=like.dtype, device=self.device)
            if self.device.startswith("cuda"):  # fixed addresses: CUDA graphs may replay over them
                torch._dynamo.mark_static_address(k)
                torch._dynamo.mark_static_address(v)
            self.keys.append(k)
            self.values.append(v)
        self.allocation = next(_ALLOCATIONS)

    def fill(self, slots: Any, layer_kv: list[tuple[Any, Any]], src_rows: Any, lengths: Any, width: int) -> None:
        """Copy left-padded prefill keys/values (``[P, Hkv, width, D]`` per layer) into ``slots``.

        Row ``j`` of the admission takes prompt ``src_rows[j]`` of the prefill, whose ``lengths[j]`` real
        tokens sit right-aligned in the prefill; they land left-aligned at columns ``[0, lengths[j])``.
        """
        import torch

        if not self.keys:
            self._allocate(layer_kv[0][0])
        cols = torch.arange(width, device=self.device)
        src_cols = (width - lengths.view(-1, 1) + cols.view(1, -1)).clamp_(max=width - 1)  # [n, width]
        for layer, (k, v) in enumerate(layer_kv):
            index = src_cols[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
            self.keys[layer][slots, :, :width] = k[src_rows].gather(2, index)
            self.values[layer][slots, :, :width] = v[src_rows].gather(2, index)
        self.col[slots] = lengths

    def select(self, index: Any) -> None:
        """Keep only slots ``index`` (tail compaction once no prompt is waiting)."""
        self.keys = [k[index] for k in self.keys]
        self.values = [v[index] for v in self.values]
        self.col = self.col[index]
        self.rows = len(index)
        self._row_index = self._row_index[: self.rows]
        self.allocation = next(_ALLOCATIONS)

    def update(self, key_states: Any, value_states: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """Write one token per row at its own column; return the filled columns ``[0, hi)``."""
        k, v = self.keys[layer_idx], self.values[layer_idx]
        k[self._row_index, :, self.col] = key_states[:, :, 0]
        v[self._row_index, :, self.col] = value_states[:, :, 0]
        return k[:, :, : self.hi], v[:, :, : self.hi]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return int(self.hi)

    def decode_mask(self) -> Any:
        """``[rows, 1, 1, hi]`` boolean mask: row r attends to its columns ``0..col[r]``."""
        import torch

        cols = torch.arange(self.hi, device=self.device)
        return (cols.view(1, -1) <= self.col.view(-1, 1)).view(self.rows, 1, 1, self.hi)
