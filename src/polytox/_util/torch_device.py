"""Device and dtype for local torch models (scorers, generation backends, fluency): ``auto`` picks the best
available, both are recorded. It sits below scoring and generation, which both use it.

``auto`` device: CUDA, else Apple MPS, else CPU. ``auto`` dtype: bfloat16 on a GPU that supports it,
float16 on other GPUs and MPS; on CPU, bfloat16 when the processor computes it natively (AVX512-BF16 or
AMX: recent Xeon and EPYC), where it is several times faster than float32 for a BERT-base classifier
(docs/scorers-local.md; ``benchmarks/bench_local_scoring.py`` measures it), else float32 (emulated half
precision is slower than float32). Reduced precision moves probabilities by up to about 1e-2, so the dtype
is part of a scorer's cache identity: float32 and bfloat16 scores are never mixed. ``dtype=float32`` gives
exact float32 scores. Generation asks for ``cpu_bf16=False``: float32 on every CPU, so sampled tokens never
depend on whether the processor computes bfloat16 natively.
"""

from __future__ import annotations

from typing import Any

from ..errors import PolytoxError

DTYPES = ("auto", "float32", "float16", "bfloat16")


def pick_device(requested: str = "auto") -> str:
    """``auto`` -> ``cuda`` / ``mps`` / ``cpu``; an explicit device must be available."""
    import torch

    if requested in ("", "auto"):
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        return "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise PolytoxError(f"device {requested!r} asked for, but torch sees no CUDA GPU; use device=auto or cpu")
    return requested


def pick_dtype(requested: str, device: str, *, cpu_bf16: bool = True) -> Any:
    """The torch dtype for ``requested`` (``auto`` or a name in ``DTYPES``) on ``device``; ``cpu_bf16=False``
    keeps ``auto`` at float32 on every CPU."""
    import torch

    if requested not in DTYPES:
        raise PolytoxError(f"dtype must be one of {', '.join(DTYPES)}, got {requested!r}")
    if requested != "auto":
        return getattr(torch, requested)
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device == "mps":
        return torch.float16
    return torch.bfloat16 if cpu_bf16 and device == "cpu" and cpu_has_native_bf16() else torch.float32


def cpu_has_native_bf16() -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (Linux ``/proc/cpuinfo`` flags; False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")
