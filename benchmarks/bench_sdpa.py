"""SDPA backends for the decode attention at RTP and PTP shapes: which kernel to use per shape.

The slot decoder's attention (``generation/slots.decode_attention``) runs one query token per row with
the query heads of a key/value group packed into the query axis: ``q [R, Hkv, G, D]`` against keys and
values ``[R, Hkv, S, D]`` and a boolean mask ``[R, 1, 1, S]``. This times that call under each backend
``torch.nn.attention.sdpa_kernel`` offers (flash, memory-efficient, cuDNN, math), for the 1B model's
heads (8 KV heads of 64, groups of 4) at the rows and read lengths of RTP (64 columns) and PTP (up to
528) settings. A backend that refuses a shape (e.g. flash with an arbitrary mask) is shown as such.
Outputs are compared with the math backend.

    python benchmarks/bench_sdpa.py [--rows 250,1000,4000] [--device cuda] [--dtype bfloat16]

Prints a table; nothing here is a test. On CPU only the math path is meaningful (a smoke run).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

SHAPES = {"rtp": [64], "ptp": [448, 528]}  # read lengths: RTP bucket; PTP early and late in a continuation
KV_HEADS, GROUP, HEAD_DIM = 8, 4, 64


def backends() -> dict[str, Any]:
    from torch.nn.attention import SDPBackend

    names = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "cudnn": "CUDNN_ATTENTION"}
    return {k: getattr(SDPBackend, v) for k, v in names.items() if hasattr(SDPBackend, v)}


def inputs(rows: int, columns: int, device: str, dtype: Any) -> tuple[Any, Any, Any, Any]:
    gen = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(rows, KV_HEADS, GROUP, HEAD_DIM, generator=gen).to(device, dtype)
    k = torch.randn(rows, KV_HEADS, columns, HEAD_DIM, generator=gen).to(device, dtype)
    v = torch.randn(rows, KV_HEADS, columns, HEAD_DIM, generator=gen).to(device, dtype)
    filled = torch.randint(1, columns + 1, (rows, 1), generator=gen)
    mask = (torch.arange(columns).view(1, -1) < filled).view(rows, 1, 1, columns).to(device)
    return q, k, v, mask


def timed(fn: Any, device: str, reps: int) -> float:
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def main() -> None:
    from torch.nn.attention import sdpa_kernel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="250,1000,4000")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"decode attention, {KV_HEADS} KV heads x {GROUP} query heads each, head dim {HEAD_DIM}, {args.dtype}, "
          f"{name}, torch {torch.__version__}; microseconds per call (16 layers per step)")
    found = backends()
    print("| case | rows | columns | " + " | ".join(found) + " | best |")
    print("|---|---|---|" + "---|" * (len(found) + 1))
    for case, lengths in SHAPES.items():
        for rows in (int(r) for r in args.rows.split(",")):
            for columns in lengths:
                q, k, v, mask = inputs(rows, columns, args.device, dtype)
                with sdpa_kernel(found["math"]):
                    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).float()
                cells, best = [], ("-", float("inf"))
                for label, backend in found.items():
                    try:
                        with sdpa_kernel(backend):
                            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                            call = (q, k, v, mask)
                            seconds = timed(lambda call=call: torch.nn.functional.scaled_dot_product_attention(
                                call[0], call[1], call[2], attn_mask=call[3]), args.device, args.reps)
                    except RuntimeError as exc:
                        cells.append(f"refused ({str(exc).splitlines()[0][:40]})")
                        continue
                    err = float((out.float() - ref).abs().max())
                    cells.append(f"{seconds * 1e6:.0f}" + ("" if err < 2e-2 else f" (max err {err:.1e})"))
                    if seconds < best[1]:
                        best = (label, seconds)
                print(f"| {case} | {rows} | {columns} | " + " | ".join(cells) + f" | {best[0]} |", flush=True)


if __name__ == "__main__":
    main()
