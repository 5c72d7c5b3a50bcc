"""How the transformers backend runs its decode step (eager, CUDA graphs, or torch.compile), and why.

``compile=auto`` must never make a run slower than the plain eager loop by much, so it only spends what
pays back within the run:

- on CUDA it starts with **CUDA graphs of the eager step** (``cuda_graphs.py``): capturing a shape costs
  about one decode step, so it pays back after a few steps of any run;
- it switches to **torch.compile** (inductor, CUDA graphs; each new shape compiles for tens of seconds) only
  when the run's size is known (the executor says how many samples are left) and the decoding time it
  would save on the remaining tokens, at the rate measured so far, exceeds the compile cost of the shapes
  met so far (``should_compile``);
- elsewhere (CPU, MPS) it decodes eagerly.

The compile cost and speedup come from ``MEASURED`` (device, versions, date and the benchmark that
produced them). Every choice is recorded with its reason and numbers (``describe()``, hence the run manifest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What ``compile=auto`` weighs, measured by ``benchmarks/gpu_rows.sh`` (``bench_gpu.py --variants
# ";compile=false;compile=true"``, RTP 128 prompts; the "On a GPU" table of docs/decoding.md): inductor's
# compile cost per decode shape (first pass minus the CUDA-graphs first pass, one shape) and its steady decode
# speed over CUDA graphs of the eager step. Rerun the benchmark on another device to replace the values.
MEASURED: dict[str, Any] = {
    "device": "NVIDIA H200",
    "torch": "2.11.0+cu130",
    "transformers": "5.17.0",
    "model": "1B Llama-shaped, bf16",
    "date": "2026-11-26",
    "source": "benchmarks/gpu_rows.sh",
    "inductor_first_pass_s": 15.8,
    "graphs_first_pass_s": 3.6,
    "inductor_tokens_per_s": 50_426,
    "graphs_tokens_per_s": 39_368,
}
INDUCTOR_SECONDS_PER_SHAPE = round(MEASURED["inductor_first_pass_s"] - MEASURED["graphs_first_pass_s"], 0)  # 12.0
INDUCTOR_SPEEDUP_OVER_GRAPHS = round(MEASURED["inductor_tokens_per_s"] / MEASURED["graphs_tokens_per_s"], 2)  # 1.28
# Read lengths (and the slot cache's capacity) are bucketed from this many columns up on CUDA.
CUDA_READ_FLOOR = 64

MODES = ("eager", "graphs", "inductor")


@dataclass
class DecodeChoice:
    """The decode mode in use and why (recorded in the manifest)."""

    mode: str
    reason: str
    requested: str = "auto"


def initial_choice(requested: str, device: str) -> DecodeChoice:
    """The mode a generator starts with, from ``--model-opt compile=`` (auto|false|graphs|true|inductor)."""
    requested = requested.lower()
    on_cuda = device.startswith("cuda")
    if requested in ("false", "eager"):
        return DecodeChoice("eager", "compile=false", requested)
    if requested in ("true", "inductor"):
        return DecodeChoice("inductor", f"compile={requested}", requested)
    if requested == "graphs":
        if not on_cuda:
            return DecodeChoice("eager", "compile=graphs needs CUDA; decoding eagerly", requested)
        return DecodeChoice("graphs", "compile=graphs", requested)
    if requested != "auto":
        raise ValueError(f"compile={requested}: expected auto, false, graphs, true or inductor")
    if on_cuda:
        return DecodeChoice(
            "graphs",
            "auto on CUDA: CUDA graphs of the eager step (capture costs about one "
            "step per shape); torch.compile only once the run is known to pay it back",
            requested,
        )
    return DecodeChoice(
        "eager",
        f"auto on {device}: CUDA graphs need CUDA, and torch.compile's cost is not known to pay back here",
        requested,
    )


def should_compile(
    remaining_tokens: int,
    tokens_per_s: float,
    shapes: int,
    seconds_per_shape: float = INDUCTOR_SECONDS_PER_SHAPE,
    speedup: float = INDUCTOR_SPEEDUP_OVER_GRAPHS,
) -> tuple[bool, str]:
    """Whether compiling ``shapes`` decode shapes pays back on ``remaining_tokens`` at the current rate.

    Saving: ``remaining / rate * (1 - 1 / speedup)`` seconds; cost: ``shapes * seconds_per_shape``.
    """
    if tokens_per_s <= 0 or remaining_tokens <= 0:
        return False, "nothing left to decode"
    saving = remaining_tokens / tokens_per_s * (1 - 1 / speedup)
    cost = max(1, shapes) * seconds_per_shape
    verdict = "compiling" if saving > cost else "not compiling"
    return saving > cost, (
        f"{verdict}: {remaining_tokens} tokens left at {tokens_per_s:.0f} tokens/s would save "
        f"{saving:.1f} s at {speedup:.2f}x, against about {cost:.0f} s to compile "
        f"{max(1, shapes)} shape(s)"
    )
