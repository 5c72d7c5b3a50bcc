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


def test_the_profile_table_ranks_kernels_by_self_time(bench) -> None:  # type: ignore[no-untyped-def]
    rows = [("aten::copy_", 10, 500.0), ("sm90_gemm|bf16", 4, 6000.0), ("sort", 2, 3000.0), ("tiny", 1, 500.0)]
    text = bench.profile_markdown(rows, "rtp, test", top=2)
    lines = text.splitlines()
    assert lines[0].startswith("Top 2 of 4 by self time (10.0 ms in all): rtp, test")
    assert lines[4] == "| 1 | `sm90_gemm/bf16` | 4 | 6.0 | 60.0% | 1,500.0 |"  # a '|' would break the table
    assert lines[5] == "| 2 | `sort` | 2 | 3.0 | 30.0% | 1,500.0 |"
    assert lines[6] == "| | the other 2 | | 1.0 | 10.0% | |"
    import torch

    a = torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            a @ a
    found = {name: calls for name, calls, us in bench.profile_rows(prof.key_averages(), "cpu")}
    assert found.get("aten::mm") == 3


def test_round5_fits_its_window_and_names_every_part() -> None:
    import re
    import subprocess

    script = REPO / "benchmarks" / "gpu_rows.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    block = text[text.index("    round5)"):text.index(";;", text.index("    round5)"))]
    limits = [int(t) for t in re.findall(r"timeout (\d+) ", block)]
    assert len(limits) == 5 and sum(limits) <= 9 * 60 - 10  # every part under its own limit, 9 minutes in all
    for part in ("bench_sampling.py", "bench_sdpa.py", "--cases rtp:1024", "--profile-dir", "--cases ptp:128",
                 "bench_serve.py --random-backbone"):
        assert part in block, part
    ptp = block[block.index("--cases ptp:128") - 200:block.index("--cases ptp:128") + 60]
    assert "--skip" not in ptp.split("--cases ptp:128")[1].split("\n")[0]  # every method at PTP 128


def test_the_random_serve_backbone_loads_as_the_embedded_one(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    transformers = pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("bench_serve", REPO / "benchmarks" / "bench_serve.py")
    assert spec is not None and spec.loader is not None
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    assert serve.GEMMA_270M["hidden_size"] == 640 and serve.GEMMA_270M["num_hidden_layers"] == 18
    tiny = {**serve.GEMMA_270M, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 6, "head_dim": 16,
            "num_attention_heads": 2, "vocab_size": 300,
            "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(6)]}
    serve.random_backbone(tmp_path, tiny)
    monkeypatch.setenv("POLYTOX_CACHE_DIR", str(tmp_path))
    from polytox.models import resolve_model

    path, _ = resolve_model("gemma-3-270m")
    assert Path(path) == tmp_path / "models" / "gemma-3-270m"
    tok = transformers.AutoTokenizer.from_pretrained(path)
    ids = tok(["Shut up, you idiot."])["input_ids"][0]
    assert ids[0] == tok.bos_token_id == 2 and len(ids) == 1 + 6  # BOS, then 4 words and 2 punctuation marks
    model = transformers.AutoModel.from_pretrained(path)
    assert model.config.num_hidden_layers == 6 and model.config.vocab_size == 300
