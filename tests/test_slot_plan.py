"""Slot growth: how many rows a decode call runs, its memory plan, bounded row counts, unchanged tokens."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

from polytox.generation.slot_plan import MAX_SLOTS, SLOT_MEMORY_SHARE, kv_bytes_per_row, ladder, plan_slots

GIB = 2**30
# Llama-3.2-1B's attention shapes (bf16: 2 bytes), RTP capacity: ~32-token prompts + 20 new, bucketed to 64.
LLAMA_1B = SimpleNamespace(num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, hidden_size=2048,
                           head_dim=64)


def test_ladder_is_short_and_doubles() -> None:
    steps = ladder(250)
    assert steps[-1] <= MAX_SLOTS and 250 in steps and 4000 in steps and 8000 not in steps
    assert all(b == 2 * a or a < 250 for a, b in itertools.pairwise(steps))
    assert len(steps) <= 14  # log2(250) rungs down, log2(4096 / 250) up


def test_kv_bytes_per_row_of_a_1b_model() -> None:
    assert kv_bytes_per_row(LLAMA_1B, 64, 2) == 2 * 16 * 8 * 64 * 64 * 2  # 2 MiB a row
    no_gqa = SimpleNamespace(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, num_key_value_heads=None)
    assert kv_bytes_per_row(no_gqa, 10, 4) == 2 * 2 * 4 * 8 * 10 * 4


def test_a_1b_model_at_rtp_settings_gets_thousands_of_rows_on_an_80_gib_gpu() -> None:
    kv, step = kv_bytes_per_row(LLAMA_1B, 64, 2), 128_256 * 28
    plan = plan_slots(100 * 25, 250, kv, step, free_bytes=75 * GIB)
    assert plan.rows == 4000  # the rung at or above 2,500 requests
    assert plan.planned_bytes == 4000 * (kv + step) <= SLOT_MEMORY_SHARE * 75 * GIB
    assert plan.manifest()["planned_gib"] == round(plan.planned_bytes / GIB, 3) and "2500 requests" in plan.reason


def test_memory_caps_the_rows_and_no_figure_keeps_the_base() -> None:
    per_row = 10 * 2**20
    plan = plan_slots(5000, 256, per_row, 0, free_bytes=8 * GIB)  # 4 GiB budget: 409 rows fit
    assert plan.rows == 256 and plan.rows * per_row <= 4 * GIB < 512 * per_row
    assert plan_slots(5000, 256, per_row, 0, free_bytes=None).rows == 256
    assert plan_slots(10, 256, per_row, 0, free_bytes=80 * GIB).rows == 16  # a small call: a small rung
    assert plan_slots(10**6, 256, 1, 0, free_bytes=80 * GIB).rows == MAX_SLOTS
    assert plan_slots(100, 256, 10 * GIB, 0, free_bytes=GIB).rows == 1  # not even one row fits: one row


def test_grow_only_keeps_the_allocated_rows() -> None:
    first = plan_slots(3000, 250, 2**20, 0, free_bytes=80 * GIB)
    later = plan_slots(40, 250, 2**20, 0, free_bytes=80 * GIB, previous=first.rows)
    assert (first.rows, later.rows) == (4000, 4000) and "grow only" in later.reason
    assert plan_slots(40, 250, 2**20, 0, free_bytes=80 * GIB, previous=0).rows == 62  # may shrink: 250 / 4


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.generation import hf  # noqa: E402

from .test_generation_continuous import generator, prompts, requests, run  # noqa: E402
from .tiny_models import make_tiny_lm  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp("llama"), arch="llama")


def test_slots_grow_with_the_run_in_few_row_counts_and_draw_the_same_tokens(tiny: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ps = prompts(12)
    reference = generator(tiny, batch_size=1, samples=3)  # CPU: the base, 3 rows
    expected = {n: run(reference, requests(ps[:n], 3)) for n in (3, 12, 5)}
    assert reference.describe()["slot_plan"]["rows"] == 3
    assert "no free-memory figure" in reference.describe()["slot_plan"]["reason"]

    monkeypatch.setattr(hf, "free_device_bytes", lambda device: 2**30)  # as a GPU with 1 GiB free would
    gen = generator(tiny, batch_size=1, samples=3)
    gen.choice.mode = "graphs"  # fixed rows per call, as under CUDA graphs (the eager step stands in)
    gen._step = lambda **kw: gen.model(**kw)
    rows_seen = []
    for n in (3, 12, 5):
        assert run(gen, requests(ps[:n], 3)) == expected[n]  # a sample's text does not depend on its rows
        plan = gen.describe()["slot_plan"]
        rows_seen.append(plan["rows"])
        assert plan["planned_bytes"] == plan["rows"] * (plan["kv_bytes_per_row"] + plan["step_bytes_per_row"])
        cache = gen._slot_cache
        assert cache is not None and cache.rows == plan["rows"]
        assert cache.nbytes() == plan["rows"] * plan["kv_bytes_per_row"]  # the plan is what was allocated
    assert rows_seen == [12, 48, 48]  # 9 and 36 requests: rungs 12 and 48; then grow only
    assert {r for r, _ in gen.shapes} <= set(ladder(3)) and len({r for r, _ in gen.shapes}) == 2


def test_slots_option_fixes_the_rows(tiny: Path) -> None:
    gen = generator(tiny, batch_size=1, samples=3, options=(("slots", "5"),))
    reference = generator(tiny, batch_size=1, samples=3)
    reqs = requests(prompts(4), 3)
    assert run(gen, reqs) == run(reference, reqs)
    assert {r for r, _ in gen.shapes} <= {5, 4, 3, 2}  # 5 rows, then tail compaction


@pytest.mark.parametrize(("key", "value"), [("sampler", "heap"), ("slots", "many")])
def test_a_wrong_slots_or_sampler_option_is_refused_before_any_work(tiny: Path, key: str, value: str) -> None:
    from polytox.errors import PolytoxError
    from polytox.generation.hf import TransformersGenerator
    from polytox.spec import GenerationSpec

    spec = GenerationSpec(model=str(tiny), samples=2, options=((key, value),))
    with pytest.raises(PolytoxError, match=key):
        TransformersGenerator.check(spec)
    TransformersGenerator.check(GenerationSpec(model=str(tiny), samples=2,
                                               options=(("sampler", "candidates"), ("slots", "auto"))))
