"""benchmarks/bench_gpu.py's pure parts on the CPU: the roofline arithmetic and the row plan (no GPU here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_gpu", REPO / "benchmarks" / "bench_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = module
    spec.loader.exec_module(module)
    return module


def llama_1b(bench):  # type: ignore[no-untyped-def]
    return {**bench.LLAMA_1B, "vocab_size": 128_256}


def test_a_1b_model_costs_about_2_5_gflop_a_token(bench) -> None:  # type: ignore[no-untyped-def]
    shape = llama_1b(bench)
    assert bench._count_params(shape) == pytest.approx(1.236e9, rel=0.01)  # Llama-3.2-1B: 1.24B
    assert 2 * bench.matmul_params(shape) == pytest.approx(2.47e9, rel=0.01)


def test_roofline_is_bandwidth_bound_at_few_rows_and_compute_bound_at_many(bench) -> None:  # type: ignore[no-untyped-def]
    shape, tokens = llama_1b(bench), 1_000_000
    common = {"prompts": 0, "prompt_tokens": 0, "new_tokens": 2, "tokens": tokens, "gbs": 3350, "tflops": 989}
    one = bench.roofline(shape, "bfloat16", rows=1, **common)
    weight_bytes = bench._count_params(shape) * 2
    assert one["decode_bound"] == "bandwidth"
    assert one["tokens_per_s"] == pytest.approx(3350e9 / weight_bytes, rel=0.01)  # ~1,350 tokens/s
    many = bench.roofline(shape, "bfloat16", rows=4096, **common)
    assert many["decode_bound"] == "compute"
    assert many["tokens_per_s"] == pytest.approx(989e12 / (2 * bench.matmul_params(shape)), rel=0.01)  # ~400K
    # the crossover: a few hundred rows
    crossing = next(r for r in range(1, 4096) if bench.roofline(shape, "bfloat16", rows=r, **common)[
        "decode_bound"] == "compute")
    assert 250 < crossing < 350


def test_roofline_counts_prefill_once_per_prompt_and_the_kv_reads(bench) -> None:  # type: ignore[no-untyped-def]
    shape = llama_1b(bench)
    ptp = {"prompt_tokens": 400, "new_tokens": 128, "gbs": 3350, "tflops": 989, "rows": 1280}
    with_prefill = bench.roofline(shape, "bfloat16", prompts=128, tokens=128 * 10 * 128, **ptp)
    without = bench.roofline(shape, "bfloat16", prompts=0, tokens=128 * 10 * 128, **ptp)
    prefill_flops = 128 * (400 * 2 * bench.matmul_params(shape) + 2 * 16 * 2048 * 400**2)
    assert with_prefill["flops"] - without["flops"] == pytest.approx(prefill_flops)
    assert with_prefill["seconds"] > without["seconds"]
    kv = bench._kv_bytes_per_token(shape, "bfloat16")
    assert kv == 16 * 2 * 8 * 64 * 2  # 32 KiB a token
    assert without["bytes"] == pytest.approx(163_840 / 1280 * bench._count_params(shape) * 2
                                             + 163_840 * (400 + 64) * kv + bench._count_params(shape) * 2)


def test_row_plan_is_the_issue_rows(bench) -> None:  # type: ignore[no-untyped-def]
    rows = bench.row_settings(bench.ROW_PLAN)
    assert [(r["case"], r["prompts"]) for r in rows] == [("rtp", 128), ("rtp", 1024), ("ptp", 128)]
    rtp, ptp = rows[0], rows[2]
    assert (rtp["samples"], rtp["max_new_tokens"], rtp["top_p"], rtp["temperature"]) == (25, 20, 0.9, 1.0)
    assert (ptp["samples"], ptp["prompt_tokens"], ptp["max_new_tokens"], ptp["temperature"], ptp["top_p"]) == (
        10, 400, 128, 0.7, 1.0)
    assert bench.hf_rows(25) == 250 and bench.hf_rows(10) == 250
    with pytest.raises(SystemExit):
        bench.row_settings("rtp:8,xyz:2")
