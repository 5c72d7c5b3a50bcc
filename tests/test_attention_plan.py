"""The decode attention's SDPA kernel per shape (``generation/attention_plan.py``), on the CPU: the choice
from the measured table, the override, the manifest entry, and the wrapped call's result."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.generation import attention_plan, slots  # noqa: E402
from polytox.generation.attention_plan import MEASURED, backend_order, decode_kernel, manifest  # noqa: E402


def test_short_reads_take_the_memory_efficient_kernel_and_long_reads_cudnn() -> None:
    assert decode_kernel(250, 64, "cuda") == "efficient"  # 62 us against cuDNN's 71
    assert decode_kernel(4000, 64, "cuda") == "efficient"  # 437 against 809
    assert decode_kernel(1000, 448, "cuda") == "cudnn"  # 584 against 600
    assert decode_kernel(1000, 528, "cuda") == "cudnn" and decode_kernel(64, 160, "cuda") == "efficient"
    assert decode_kernel(64, 192, "cuda") == "cudnn"  # nearer 448 than 64 on a log scale
    # the table decides: swap two timings and the choice follows
    shapes = [(250, 64, {"efficient": 90, "cudnn": 71}), *MEASURED["shapes"][1:]]
    original = MEASURED["shapes"]
    decode_kernel.cache_clear()
    try:
        MEASURED["shapes"] = shapes
        assert decode_kernel(250, 64, "cuda") == "cudnn" and decode_kernel(4000, 64, "cuda") == "efficient"
    finally:
        MEASURED["shapes"] = original
        decode_kernel.cache_clear()


def test_the_table_names_its_device_and_date_and_other_devices_keep_torchs_choice() -> None:
    assert MEASURED["device"] == "NVIDIA H200" and MEASURED["date"] and MEASURED["torch"]
    assert "H200" in attention_plan.table_label()
    assert decode_kernel(250, 64, "cpu") is None and decode_kernel(250, 64, "mps") is None
    assert decode_kernel(250, 64, "cuda", "cudnn") == "cudnn" and decode_kernel(250, 64, "cuda", "torch") is None
    with pytest.raises(ValueError, match="attention=flash"):
        decode_kernel(250, 64, "cuda", "flash")
    from torch.nn.attention import SDPBackend

    assert backend_order("cudnn") == [SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    assert backend_order("math") == [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]


def test_the_manifest_names_the_kernel_of_every_shape_met() -> None:
    cuda = manifest({(4000, 64), (1000, 448)}, "cuda")
    assert cuda["attention_kernels"] == {"1000x448": "cudnn", "4000x64": "efficient"}
    assert "H200" in cuda["attention_table"] and cuda["attention_option"] == "auto"
    forced = manifest({(4000, 64)}, "cuda", "math")
    assert forced["attention_kernels"] == {"4000x64": "math"} and forced["attention_table"] is None
    assert manifest({(8, 16)}, "cpu")["attention_kernels"] == {"8x16": "torch"}


def test_a_chosen_kernel_computes_what_torchs_choice_does(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(3, 8, 1, 16, generator=gen)
    k = torch.randn(3, 2, 9, 16, generator=gen)
    v = torch.randn(3, 2, 9, 16, generator=gen)
    mask = (torch.arange(9).view(1, -1) < torch.tensor([[2], [9], [5]])).view(3, 1, 1, 9)
    module = torch.nn.Module()
    plain, _ = slots.decode_attention(module, q, k, v, mask)
    seen: list[tuple[int, int, str, str]] = []

    def forced(rows: int, columns: int, device_type: str, requested: str = "auto") -> str:
        seen.append((rows, columns, device_type, requested))
        return "math"

    monkeypatch.setattr(slots, "decode_kernel", forced)
    setattr(module, slots.ATTENTION_ATTR, "math")
    chosen, _ = slots.decode_attention(module, q, k, v, mask)
    assert seen == [(3, 9, "cpu", "math")]
    torch.testing.assert_close(chosen, plain, rtol=1e-6, atol=1e-6)
