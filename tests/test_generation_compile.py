"""Compiled decode steps meet a bounded set of shapes, ``compile=auto`` decides from the run, and says why.

No GPU here: dynamo's own counters (``torch._dynamo.utils.counters["stats"]["unique_graphs"]``) count the
graphs a compiled decode step was traced into, with the ``eager`` dynamo backend (fast; the shapes and
recompilations are dynamo's, whatever the backend) and, in a slow test, inductor. CUDA graphs of the eager
step (``compile=auto`` on CUDA) need a GPU and are measured by ``benchmarks/bench_gpu.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.generation.continuous import DecodeSettings, decode  # noqa: E402
from polytox.generation.decode_plan import (  # noqa: E402
    INDUCTOR_SECONDS_PER_SHAPE,
    INDUCTOR_SPEEDUP_OVER_GRAPHS,
    MEASURED,
    DecodeChoice,
    initial_choice,
    should_compile,
)
from polytox.generation.hf import TransformersGenerator  # noqa: E402
from polytox.generation.slots import bucket_length  # noqa: E402
from polytox.runner import execute_run as evaluate  # noqa: E402
from polytox.spec import EvalSpec, GenerationSpec, PromptSpec, ScorerSpec  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

from .tiny_models import make_tiny_lm  # noqa: E402

WORDS = "the weather this morning was cold and my neighbour told me that you are an idiot shut up".split()
CONTEXT = 128


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp("llama"), arch="llama", context=CONTEXT)


def prompts(n: int, lo: int, hi: int, seed: int = 5) -> list[Prompt]:
    rng = np.random.default_rng(seed)
    return [Prompt(id=f"p{i}", text=" ".join(rng.choice(WORDS, size=int(rng.integers(lo, hi)))), lang="en")
            for i in range(n)]


def generator(path: Path, samples: int, max_new: int, *options: tuple[str, str]) -> TransformersGenerator:
    return TransformersGenerator(GenerationSpec(
        model=str(path), samples=samples, max_new_tokens=max_new, temperature=1.0, top_p=0.9, batch_size=2,
        chat_template="never", device="cpu", dtype="float32", options=options))


def with_random_eos(gen: TransformersGenerator) -> None:
    """Rows end at EOS at random steps: a quarter of the vocabulary (the most sampled tokens) ends a row."""
    gen.eos_ids = [int(t) for t in range(3, len(gen.tokenizer), 4)]


def shards(gen: TransformersGenerator, ps: list[Prompt], size: int) -> list[tuple[str | None, int, str]]:
    out = []
    for i in range(0, len(ps), size):
        reqs = [GenerationRequest(p, k, derive_seed(1, p.id, k)) for p in ps[i: i + size]
                for k in range(gen.spec.samples)]
        outs = gen.generate(reqs)
        assert all(o.error is None for o in outs), [o.error for o in outs if o.error][:2]
        out += [(o.text, o.n_tokens, o.finish_reason) for o in outs]
    return out


def compiled_run(path: Path, ps: list[Prompt], samples: int, max_new: int, backend: str,
                 shard: int) -> tuple[int, TransformersGenerator, list[tuple[str | None, int, str]]]:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    gen = generator(path, samples, max_new, ("compile", "true"), ("compile_backend", backend))
    with_random_eos(gen)
    out = shards(gen, ps, shard)
    return int(counters["stats"]["unique_graphs"]), gen, out


def hi_buckets(longest: int) -> int:
    """How many read lengths a bucketed decode step can meet for sequences up to ``longest`` columns."""
    return len({bucket_length(n, 64) for n in range(1, longest + 1)})


def test_bucket_lengths_are_few_and_close() -> None:
    assert [bucket_length(n, 64) for n in (1, 64, 65, 80, 81, 400, 512, 513, 528)] == [
        64, 64, 80, 80, 96, 448, 512, 640, 640]
    assert hi_buckets(4096) == 25  # 64, then four per doubling up to 4096
    assert all(n <= bucket_length(n, 64) <= max(64, n * 1.25) for n in range(1, 4097))
    assert bucket_length(7, 0) == 7 and bucket_length(9, 0) == 10  # floor 0: exact below 8, then buckets


def test_compile_auto_choice_and_payback() -> None:
    assert initial_choice("auto", "cuda:0").mode == "graphs"
    assert initial_choice("auto", "cpu").mode == "eager"
    assert initial_choice("true", "cpu").mode == "inductor"
    assert initial_choice("false", "cuda").mode == "eager"
    graphs_on_cpu = initial_choice("graphs", "cpu")
    assert graphs_on_cpu.mode == "eager" and "needs CUDA" in graphs_on_cpu.reason
    with pytest.raises(ValueError, match="compile=yes"):
        initial_choice("yes", "cpu")
    # a full RTP run (100K prompts x 25 x 20 tokens) pays back the compilation; a 128-prompt run does not
    assert should_compile(50_000_000, 40_000, 1)[0]
    small, why = should_compile(64_000, 40_000, 1)
    assert not small and "not compiling" in why and "12 s" in why
    assert not should_compile(10**9, 40_000, 10**6)[0]  # too many shapes to compile
    assert not should_compile(0, 40_000, 1)[0]


def test_compile_cost_and_speedup_come_from_the_measured_table() -> None:
    """The numbers ``compile=auto`` weighs are read from one table that says where they were measured."""
    for key in ("device", "torch", "date", "source"):
        assert MEASURED[key], key
    assert (Path(__file__).resolve().parent.parent / MEASURED["source"]).is_file()
    assert INDUCTOR_SECONDS_PER_SHAPE == 12.0  # 15.8 s first pass against 3.6 s with CUDA graphs
    assert INDUCTOR_SPEEDUP_OVER_GRAPHS == 1.28  # 50,426 against 39,368 tokens/s
    assert should_compile(10**6, 40_000, 1) == should_compile(10**6, 40_000, 1, 12.0, 1.28)


def test_auto_switches_to_the_compiler_only_when_the_rest_of_the_run_pays(tiny: Path) -> None:
    gen = generator(tiny, 2, 8)
    assert gen.describe()["decode_mode"] == "eager"  # CPU
    gen.choice = DecodeChoice("graphs", "as on CUDA", "auto")  # the CUDA start, without a GPU
    gen.shapes = {(4, 64)}
    gen.plan_run(4_000)
    gen._after_call(tokens=16_000, seconds=1.0, requests=2_000)  # 2,000 left at 16K tokens/s: 2 s, no
    assert gen.choice.mode == "graphs" and gen.choice.reason.startswith("not compiling")
    gen.plan_run(20_000_000)
    gen._after_call(tokens=16_000, seconds=1.0, requests=2_000)
    info = gen.describe()
    assert info["decode_mode"] == "inductor" and info["decode_mode_reason"].startswith("compiling")
    assert info["planned_requests"] == 20_000_000


def test_rtp_like_run_compiles_one_graph_and_draws_what_eager_draws(tiny: Path) -> None:
    ps = prompts(9, 1, 14)
    eager_gen = generator(tiny, 5, 10, ("compile", "false"))
    with_random_eos(eager_gen)
    eager = shards(eager_gen, ps, 4)
    assert {r[2] for r in eager} == {"stop", "length"} and len({r[1] for r in eager}) > 3
    graphs, gen, compiled = compiled_run(tiny, ps, 5, 10, "eager", 4)
    assert compiled == eager  # same seeds, same tokens
    longest = max(len(gen.encode(p)[0]) for p in ps) + 10
    assert longest <= 64 and hi_buckets(longest) == 1
    assert graphs == 1, graphs  # fixed rows (10 slots) and one read length: one graph over three shards
    info = gen.describe()
    assert info["decode_mode"] == "inductor" and info["decode_shapes"] == 1 and info["compile_option"] == "true"


def test_ptp_like_run_stays_within_the_read_length_buckets(tiny: Path) -> None:
    ps = prompts(8, 6, 40, seed=6)
    graphs, gen, compiled = compiled_run(tiny, ps, 3, 40, "eager", 3)
    lengths = [len(gen.encode(p)[0]) for p in ps]
    assert max(lengths) - min(lengths) > 20  # exact read lengths would give a graph per step
    bound = hi_buckets(CONTEXT)
    assert graphs <= bound, (graphs, bound)
    assert gen.describe()["decode_shapes"] <= bound
    eager_gen = generator(tiny, 3, 40, ("compile", "false"))
    with_random_eos(eager_gen)
    assert compiled == shards(eager_gen, ps, 3)


@pytest.mark.slow
def test_inductor_on_cpu_compiles_within_the_bound_and_draws_what_eager_draws(tiny: Path) -> None:
    ps = prompts(5, 1, 14)
    eager_gen = generator(tiny, 3, 8, ("compile", "false"))
    with_random_eos(eager_gen)
    graphs, _, compiled = compiled_run(tiny, ps, 3, 8, "inductor", 3)
    assert graphs == 1
    assert compiled == shards(eager_gen, ps, 3)


def test_a_prompt_split_over_two_admissions_is_prefilled_once(tiny: Path) -> None:
    gen = generator(tiny, 4, 12)
    encoded = [gen.encode(p)[0] for p in prompts(5, 1, 14)]
    rows = [i for i in range(5) for _ in range(4)]
    seeds = list(range(20))

    def once(slots: int) -> tuple[list[list[int]], dict[str, object]]:
        settings = DecodeSettings(max_new_tokens=12, temperature=0.8, top_p=0.95, top_k=0, slots=slots,
                                  prefill_batch=2, min_admit=1)
        with torch.inference_mode():
            res = decode(gen.model, encoded, rows, seeds, settings, [3, 7, 11], gen.pad_id, "cpu")
        return res.tokens, res.stats

    wide, wide_stats = once(20)
    narrow, narrow_stats = once(3)  # 3 slots, 4 samples per prompt: every prompt is split
    assert narrow == wide
    assert wide_stats["prefilled_prompts"] == 5 and narrow_stats["prefilled_prompts"] == 5


def test_the_manifest_records_the_decode_choice(tmp_path: Path, tiny: Path) -> None:
    source = tmp_path / "prompts.jsonl"
    source.write_text("".join(json.dumps({"id": p.id, "text": p.text, "lang": "en"}) + "\n"
                              for p in prompts(6, 1, 10)))
    spec = EvalSpec(prompts=PromptSpec(source=str(source), format="generic"),
                    generation=GenerationSpec(model=str(tiny), backend="transformers", samples=2, max_new_tokens=4,
                                              device="cpu", dtype="float32", chat_template="never"),
                    scorer=ScorerSpec(name="fake"), shard_size=4)
    evaluate(spec, tmp_path / "run")
    model = json.loads((tmp_path / "run" / "manifest.json").read_text())["model"]
    assert model["decode_mode"] == "eager" and model["compile_option"] == "auto"
    assert model["decode_mode_reason"].startswith("auto on cpu")
    assert model["planned_requests"] == 12  # 6 prompts x K=2, told by the executor
