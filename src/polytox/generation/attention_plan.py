"""Which SDPA kernel runs the one-token decode attention, per decode shape, from a measured table.

The slot decoder's attention (``slots.decode_attention``) has one query token per row and a per-row
padding mask, so flash attention refuses it; of the kernels left, memory-efficient attention was the
fastest at short reads and cuDNN's at long ones (``MEASURED``, from ``benchmarks/bench_sdpa.py``). Left to
itself torch runs cuDNN's, which is slower at the short reads of RTP settings (docs/decoding.md, "On a GPU").

``decode_kernel`` picks, for a step of ``rows`` rows reading ``columns`` columns on CUDA, the fastest
kernel of the nearest measured shape (nearest read length first, then nearest row count, both on a log
scale). The chosen kernel is tried first and the others stay allowed after it, so a kernel that
refuses a shape costs nothing but the choice. On other devices torch chooses (``None``). The choice per
shape met is in the run manifest (``model.attention_kernels``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

# Microseconds per call of the decode attention (8 KV heads x 4 query heads each, head dim 64, bf16): one
# NVIDIA H200, torch 2.11.0+cu130, benchmarks/bench_sdpa.py, recorded 2026-11-27 (docs/decoding.md, "On a GPU").
MEASURED: dict[str, Any] = {
    "device": "NVIDIA H200",
    "torch": "2.11.0+cu130",
    "date": "2026-11-27",
    "source": "benchmarks/bench_sdpa.py",
    "shapes": [  # (rows, columns, {kernel: microseconds}); flash refused every shape (the mask)
        (250, 64, {"math": 176, "efficient": 62, "cudnn": 71}),
        (4000, 64, {"math": 1892, "efficient": 437, "cudnn": 809}),
        (1000, 448, {"efficient": 600, "cudnn": 584}),
    ],
}
KERNELS = ("auto", "efficient", "cudnn", "math", "torch")  # the ``attention`` option; torch = torch's own order
_BACKENDS = {"efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


def table_label() -> str:
    """The table's device, torch and date, for the manifest."""
    return f"{MEASURED['device']}, torch {MEASURED['torch']}, {MEASURED['date']} ({MEASURED['source']})"


def nearest_shape(rows: int, columns: int) -> tuple[int, int, dict[str, float]]:
    """The measured shape nearest ``rows x columns``: nearest read length, then nearest row count (log scale)."""

    def distance(shape: tuple[int, int, dict[str, float]]) -> tuple[float, float]:
        return abs(math.log(columns / shape[1])), abs(math.log(rows / shape[0]))

    return min(MEASURED["shapes"], key=distance)


@lru_cache(maxsize=256)
def decode_kernel(rows: int, columns: int, device_type: str, requested: str = "auto") -> str | None:
    """The SDPA kernel to try first for a decode step (``efficient`` | ``cudnn`` | ``math``), or None: torch's."""
    if requested not in KERNELS:
        raise ValueError(f"attention={requested}: expected one of {', '.join(KERNELS)}")
    if device_type != "cuda" or requested == "torch":
        return None
    if requested != "auto":
        return requested
    timings = nearest_shape(max(1, rows), max(1, columns))[2]
    return min((k for k in timings if k != "math"), key=timings.__getitem__)


def backend_order(first: str) -> list[Any]:
    """``torch.nn.attention.SDPBackend`` values: ``first``, then the other kernels, math last."""
    return list(_backend_order(first))


@lru_cache(maxsize=8)
def _backend_order(first: str) -> tuple[Any, ...]:
    from torch.nn.attention import SDPBackend

    names = [first, *(k for k in ("efficient", "cudnn") if k != first), "math"]
    return tuple(getattr(SDPBackend, _BACKENDS[n]) for n in dict.fromkeys(names))


def manifest(shapes: Any, device_type: str, requested: str = "auto") -> dict[str, Any]:
    """The kernel chosen for each decode shape ``(rows, columns)`` met, and the table it came from."""
    kernels = {f"{r}x{c}": decode_kernel(r, c, device_type, requested) or "torch" for r, c in sorted(shapes)}
    table = table_label() if device_type == "cuda" and requested == "auto" else None
    return {"attention_option": requested, "attention_kernels": kernels, "attention_table": table}
