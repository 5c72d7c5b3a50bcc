"""Float32 linear layers through oneDNN's kernel on CPU.

torch computes a float32 ``nn.Linear`` on CPU with MKL's sgemm. On AMD processors MKL takes its AVX2 path
even where the CPU has AVX-512, so it runs at about half of the processor's float32 rate; oneDNN, bundled
with torch, picks the widest kernel on any x86 vendor (docs/scorer-speed.md has the measurements).
``use_onednn_linears`` routes a module's float32 linear layers through ``torch.ops.mkldnn._linear_pointwise``,
the op torch's own compiler emits for a CPU linear layer. oneDNN's default math mode is strict float32 (no
bfloat16 down-conversion unless ``torch.backends.mkldnn.matmul.fp32_precision`` asks for it), so values move
only in float32's last bits, from the order of the sums. A layer keeps torch's path where the op is missing,
disagrees with ``F.linear`` on a probe, or a gradient is needed.
"""

from __future__ import annotations

from typing import Any

# The largest |difference| from ``F.linear`` accepted on the probe, relative to the output's scale: float32
# sums of a few thousand terms in another order differ by about 1e-6 of it.
_PROBE_TOLERANCE = 1e-4


def onednn_linear_works() -> bool:
    """Whether ``torch.ops.mkldnn._linear_pointwise`` exists here and gives ``F.linear``'s float32 values on
    a probe input (checked once per process)."""
    global _WORKS
    if _WORKS is None:
        _WORKS = _probe()
    return _WORKS


_WORKS: bool | None = None


def _probe() -> bool:
    import torch

    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 96, generator=generator)
    weight = torch.randn(40, 96, generator=generator)
    bias = torch.randn(40, generator=generator)
    try:
        with torch.inference_mode():
            ours = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
            theirs = torch.nn.functional.linear(x, weight, bias)
    except (RuntimeError, NotImplementedError):
        return False
    if ours.shape != theirs.shape or ours.dtype != torch.float32:
        return False
    return bool(((ours - theirs).abs().max() <= _PROBE_TOLERANCE * theirs.abs().max()).item())


def use_onednn_linears(module: Any) -> int:
    """Route every float32 CPU ``nn.Linear`` inside ``module`` through oneDNN (in place); returns how many.

    Each layer keeps its class's parameters, names and hooks: only its ``forward`` changes (the instance's
    class becomes ``_OneDnnLinear``). Nothing changes where the op does not work here."""
    import torch

    if not onednn_linear_works():
        return 0
    count = 0
    for child in module.modules():
        if type(child) is torch.nn.Linear and child.weight.device.type == "cpu" and child.weight.dtype == torch.float32:
            child.__class__ = _linear_class()
            count += 1
    return count


def restore_linears(module: Any) -> int:
    """Undo ``use_onednn_linears`` (for ``torch.compile``, which cannot trace oneDNN's op); returns how many."""
    import torch

    count = 0
    for child in module.modules():
        if _CLASS is not None and type(child) is _CLASS:
            child.__class__ = torch.nn.Linear
            count += 1
    return count


_CLASS: Any = None


def _linear_class() -> Any:
    """``nn.Linear`` whose forward runs oneDNN's kernel (made on first use: torch is imported lazily)."""
    global _CLASS
    if _CLASS is None:
        import torch

        class _OneDnnLinear(torch.nn.Linear):
            def forward(self, input: torch.Tensor) -> torch.Tensor:
                grad = torch.is_grad_enabled() and (input.requires_grad or self.weight.requires_grad)
                if grad or input.dtype != torch.float32:
                    return torch.nn.functional.linear(input, self.weight, self.bias)
                return torch.ops.mkldnn._linear_pointwise(input.contiguous(), self.weight, self.bias, "none", [], "")

        _CLASS = _OneDnnLinear
    return _CLASS
