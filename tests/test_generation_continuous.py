"""Continuous batching, slot cache, device-side sampling and decode attention, on tiny random models.

The lock-step loop (``continuous=false``) is the reference: the slot decoder must draw exactly the same
tokens whatever the number of slots, the refill cadence, or the EOS read-back interval.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.generation.continuous import DecodeSettings, decode  # noqa: E402
from polytox.generation.hf import TransformersGenerator  # noqa: E402
from polytox.generation.sampling import sample_next  # noqa: E402
from polytox.generation.slots import decode_attention  # noqa: E402
from polytox.spec import GenerationSpec  # noqa: E402
from polytox.types import GenerationRequest, Prompt, derive_seed  # noqa: E402

from .tiny_models import make_tiny_lm  # noqa: E402

WORDS = "the weather this morning was cold and my neighbour told me that you are an idiot shut up".split()


def prompts(n: int) -> list[Prompt]:
    rng = np.random.default_rng(3)
    return [Prompt(id=f"p{i}", text=" ".join(rng.choice(WORDS, size=int(rng.integers(1, 14)))), lang="en")
            for i in range(n)]


def requests(ps: list[Prompt], k: int, seed: int = 0) -> list[GenerationRequest]:
    return [GenerationRequest(p, s, derive_seed(seed, p.id, s)) for p in ps for s in range(k)]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_lm(tmp_path_factory.mktemp(request.param), arch=request.param)


def generator(path: Path, **kw: object) -> TransformersGenerator:
    options = kw.pop("options", ())
    base = {"model": str(path), "samples": 3, "max_new_tokens": 10, "temperature": 1.0, "top_p": 0.9,
            "batch_size": 2, "chat_template": "never", "options": options}
    base.update(kw)
    return TransformersGenerator(GenerationSpec(**base))  # type: ignore[arg-type]


def frequent_eos(gen: TransformersGenerator, ps: list[Prompt]) -> None:
    """Make the tokens the model samples most often the EOS, so rows end at different steps."""
    settings = DecodeSettings(max_new_tokens=10, temperature=1.0, top_p=0.9, top_k=0, slots=64, prefill_batch=8)
    encoded = [gen.encode(p)[0] for p in ps]
    rows = [i for i in range(len(ps)) for _ in range(3)]
    with torch.inference_mode():
        res = decode(gen.model, encoded, rows, list(range(len(rows))), settings, [], gen.pad_id, "cpu")
    counts = np.bincount([t for row in res.tokens for t in row])
    gen.eos_ids = [int(t) for t in np.argsort(-counts)[:25]]  # ~10% per step on a near-uniform model


def run(gen: TransformersGenerator, reqs: list[GenerationRequest]) -> list[tuple[str | None, int, str]]:
    outs = gen.generate(reqs)
    assert all(o.error is None for o in outs), [o.error for o in outs if o.error][:2]
    return [(o.text, o.n_tokens, o.finish_reason) for o in outs]


def test_continuous_equals_lock_step_whatever_the_slots_and_refills(tiny: Path) -> None:
    ps = prompts(7)
    reqs = requests(ps, 3)
    reference_gen = generator(tiny, batch_size=7, options=(("continuous", "false"),))
    assert not reference_gen.continuous
    frequent_eos(reference_gen, ps)
    reference = run(reference_gen, reqs)
    assert {r[2] for r in reference} == {"stop", "length"}, "rows must end at different steps"
    assert len({r[1] for r in reference}) > 3
    for batch, options in ((1, ()), (2, (("check_every", "3"),)), (7, (("min_admit", "1"),)),
                           (3, (("check_every", "5"), ("min_admit", "2")))):
        gen = generator(tiny, batch_size=batch, options=options)
        assert gen.continuous and gen.describe()["continuous_batching"] is True
        gen.eos_ids = reference_gen.eos_ids
        assert run(gen, reqs) == reference, (batch, options)
        # a request's result does not depend on the order or company it arrives in
        shuffled = list(reversed(reqs))[::2]
        by_key = {(r.prompt.id, r.sample_index): out for r, out in zip(reqs, reference, strict=True)}
        assert run(gen, shuffled) == [by_key[(r.prompt.id, r.sample_index)] for r in shuffled]


def test_decode_refills_slots_and_matches_one_slot_per_request(tiny: Path) -> None:
    gen = generator(tiny)
    frequent_eos(gen, prompts(1))
    encoded = [gen.encode(p)[0] for p in prompts(5)]
    rows = [i for i in range(5) for _ in range(4)]
    seeds = [derive_seed(9, f"p{r}", s) for r, s in zip(rows, [0, 1, 2, 3] * 5, strict=True)]

    def once(slots: int, check: int) -> tuple[list[list[int]], int]:
        settings = DecodeSettings(max_new_tokens=12, temperature=0.8, top_p=0.95, top_k=0, slots=slots,
                                  prefill_batch=2, check_every=check, min_admit=1)
        with torch.inference_mode():
            res = decode(gen.model, encoded, rows, seeds, settings, gen.eos_ids, gen.pad_id, "cpu")
        assert res.stats["prefilled_prompts"] == 5  # each prompt once, however its samples were admitted
        assert len(res.tokens) == 20 and all(len(t) <= 12 for t in res.tokens)
        assert all(not s or len(t) < 12 for t, s in zip(res.tokens, res.stopped, strict=True))
        return res.tokens, res.admissions

    wide, admissions_wide = once(20, 1)
    narrow, admissions_narrow = once(3, 1)
    lazy, _ = once(4, 4)
    assert admissions_narrow > admissions_wide  # slots were refilled
    assert narrow == wide and lazy == wide


def test_greedy_equals_generate_on_a_gqa_model(tmp_path: Path) -> None:
    path = make_tiny_lm(tmp_path / "m", arch="llama", seed=1)
    gen = generator(path, temperature=0.0, samples=1, max_new_tokens=12, batch_size=2)
    ps = prompts(5)
    outs = gen.generate(requests(ps, 1))
    for p, o in zip(ps, outs, strict=True):
        ids, _ = gen.encode(p)
        ref = gen.model.generate(input_ids=torch.tensor([ids]),
                                 attention_mask=torch.ones(1, len(ids), dtype=torch.long), do_sample=False,
                                 max_new_tokens=12, pad_token_id=gen.pad_id)
        new = ref[0, len(ids):].tolist()
        cut = next((i for i, t in enumerate(new) if t in gen.eos_ids), len(new))
        assert o.text == gen.tokenizer.decode(new[:cut], skip_special_tokens=True)
        assert o.n_tokens == cut


def test_decode_attention_equals_repeated_heads_reference() -> None:
    from transformers.integrations.sdpa_attention import repeat_kv

    gen = torch.Generator().manual_seed(0)
    rows, heads, kv_heads, length, dim = 5, 8, 2, 11, 16
    q = torch.randn(rows, heads, 1, dim, generator=gen)
    k = torch.randn(rows, kv_heads, length, dim, generator=gen)
    v = torch.randn(rows, kv_heads, length, dim, generator=gen)
    filled = torch.tensor([1, 4, 11, 7, 2])
    mask = (torch.arange(length).view(1, -1) < filled.view(-1, 1)).view(rows, 1, 1, length)

    class Module(torch.nn.Module):
        num_key_value_groups = heads // kv_heads
        is_causal = True

    out, _ = decode_attention(Module(), q, k, v, mask, scaling=0.25)
    ref = torch.nn.functional.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), attn_mask=mask,
                                                           scale=0.25).transpose(1, 2)
    assert out.shape == (rows, 1, heads, dim)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    # the first row sees only its first key: its output is that value, per group
    torch.testing.assert_close(out[0, 0, :4], v[0, 0, 0].expand(4, -1), rtol=1e-5, atol=1e-6)


def reference_sample(logits: np.ndarray, u: float, temperature: float, top_p: float, top_k: int) -> int:
    """Straightforward float64 version: sort, keep top-k, keep the nucleus, renormalise, invert the CDF.

    Without any filter the CDF is taken in vocabulary order (no sort needed), as polytox does."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable") if (top_k or top_p < 1) else np.arange(len(p))
    sp = p[order]
    keep = np.ones_like(sp, dtype=bool)
    if top_k:
        keep[top_k:] = False
        sp = np.where(keep, sp, 0)
        sp = sp / sp.sum()
    if top_p < 1:
        above = np.cumsum(sp) - sp
        keep &= above < top_p
    kept = np.where(keep, sp, 0)
    cdf = np.cumsum(kept)
    return int(order[min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(p) - 1)])


@pytest.mark.parametrize(("top_p", "top_k"), [(0.9, 0), (0.5, 0), (1.0, 0), (1.0, 7), (0.8, 20)])
def test_sampler_equals_a_straightforward_reference(top_p: float, top_k: int) -> None:
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(300, 500, generator=gen) * 2.5
    u = torch.rand(300, generator=gen)
    picks = {m: sample_next(logits, u, 0.9, top_p, top_k, method=m) for m in ("candidates", "sort")}
    assert torch.equal(picks["candidates"], picks["sort"])  # the candidate set and the full sort agree
    ref = [reference_sample(logits[i].numpy(), float(u[i]), 0.9, top_p, top_k) for i in range(300)]
    mismatches = sum(int(a != b) for a, b in zip(picks["sort"].tolist(), ref, strict=True))
    assert mismatches <= 1, mismatches  # float32 vs float64 may split a CDF boundary, at most once here


def test_sampler_rows_do_not_depend_on_their_neighbours() -> None:
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(64, 300, generator=gen)
    u = torch.rand(64, generator=gen)
    for method in ("sort", "candidates"):
        whole = sample_next(logits, u, 1.0, 0.9, 0, method=method, candidates=40)
        halves = torch.cat([sample_next(logits[:17], u[:17], 1.0, 0.9, 0, method=method, candidates=40),
                            sample_next(logits[17:], u[17:], 1.0, 0.9, 0, method=method, candidates=40)])
        assert torch.equal(whole, halves)


@pytest.mark.slow
def test_compiled_decode_step_matches_eager(tmp_path: Path) -> None:
    """``compile=true`` (on CUDA: CUDA graphs) runs the same decode step through torch.compile."""
    path = make_tiny_lm(tmp_path / "m", arch="llama")
    reqs = requests(prompts(4), 2)
    eager = run(generator(path, batch_size=2, samples=2, max_new_tokens=6), reqs)
    compiled_gen = generator(path, batch_size=2, samples=2, max_new_tokens=6, options=(("compile", "true"),))
    assert compiled_gen.describe()["compiled_decode"] is True
    assert run(compiled_gen, reqs) == eager


def test_a_decode_step_that_cannot_compile_falls_back_to_eager(tmp_path: Path) -> None:
    path = make_tiny_lm(tmp_path / "m", arch="llama")
    reqs = requests(prompts(3), 2)
    eager = run(generator(path, samples=2), reqs)
    gen = generator(path, samples=2)

    def broken(**kwargs: object) -> None:
        raise RuntimeError("cannot capture this model")

    gen._step = broken
    assert run(gen, reqs) == eager
    info = gen.describe()
    assert info["compiled_decode"] is False and "cannot capture" in info["compile_error"]


@pytest.mark.parametrize("share", [1.0, 1 / 16])
def test_the_device_fallback_decodes_the_host_fallback_tokens(tiny: Path, share: float,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With 8 candidates every row of a near-uniform tiny model falls back: a budget of every row sorts them on
    the device; a budget of 1/16 of them overflows, and the call is decoded again with the host fallback."""
    from polytox.generation import sampling

    monkeypatch.setattr(sampling, "NUCLEUS_CANDIDATES", 8)
    monkeypatch.setattr(sampling, "FALLBACK_ROWS_SHARE", share)
    gen = generator(tiny)
    encoded = [gen.encode(p)[0] for p in prompts(4)]
    rows = [i for i in range(4) for _ in range(5)]
    seeds = [derive_seed(4, f"p{r}", s) for r, s in zip(rows, [0, 1, 2, 3, 4] * 4, strict=True)]

    def once(fallback: str) -> tuple[list[list[int]], dict[str, object]]:
        settings = DecodeSettings(max_new_tokens=8, temperature=1.0, top_p=0.9, top_k=0, slots=20,
                                  prefill_batch=4, check_every=3, sampler="candidates", fallback=fallback)
        with torch.inference_mode():
            res = decode(gen.model, encoded, rows, seeds, settings, [], gen.pad_id, "cpu")
        return res.tokens, res.stats

    host, host_stats = once("host")
    device, device_stats = once("device")
    assert device == host and host_stats["sampler_fallback"] == "host"
    assert device_stats.get("fallback_overflow", False) is (share < 1)
    assert device_stats["sampler_fallback"] == ("host" if share < 1 else "device")
    monkeypatch.setattr(sampling, "NUCLEUS_CANDIDATES", 4096)  # the sort alone: the same tokens again
    assert once("host")[0] == host


def test_the_manifest_records_the_sampler_fallback_and_attention(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polytox.generation import sampling

    reqs = requests(prompts(3), 3)
    host = generator(tiny)
    info = host.describe()
    assert (info["sampler"], info["sampler_fallback"], info["sampler_fallback_overflows"]) == ("candidates", "host", 0)
    reference = run(host, reqs)
    info = host.describe()
    assert info["attention_option"] == "auto" and info["attention_table"] is None  # CPU: torch's choice
    assert info["attention_kernels"] and set(info["attention_kernels"].values()) == {"torch"}
    monkeypatch.setattr(sampling, "NUCLEUS_CANDIDATES", 8)  # every row falls back: the budget overflows
    gen = generator(tiny, options=(("sampler_fallback", "device"), ("attention", "math")))
    assert gen.describe()["sampler_fallback"] == "device"
    assert run(gen, reqs) == reference
    info = gen.describe()
    assert (info["sampler_fallback"], info["sampler_fallback_overflows"]) == ("host", 1)  # host from then on
    assert info["attention_option"] == "math"
