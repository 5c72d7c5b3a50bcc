"""The nucleus sampler without a full sort (``method="candidates"``) against the full sort it replaces.

Exact equality is the claim: for the same logits and uniforms (the same seeds) every method draws the same
token, whether a row's nucleus ends inside the candidate set or falls back to the sort, ties included.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from polytox.generation.sampling import (  # noqa: E402
    candidate_set,
    fallback_budget,
    resolve_fallback,
    resolve_method,
    sample_next,
)


def mixed_logits(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Half peaked rows (Zipf-like, as a trained model's), half flat rows (nuclei wider than any candidate set)."""
    gen = torch.Generator().manual_seed(seed)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float32)
    out = torch.empty(rows, vocab)
    for r in range(rows):
        if r % 2:
            out[r] = torch.randn(vocab, generator=gen) * 0.2
        else:
            alpha = 1.5 + 0.7 * torch.rand(1, generator=gen)
            out[r] = (-alpha * ranks.log())[torch.randperm(vocab, generator=gen)]
    return out


@pytest.mark.parametrize(("temperature", "top_p", "top_k"),
                         [(1.0, 0.9, 0), (0.7, 0.5, 0), (1.5, 0.99, 0), (1.0, 1.0, 0), (1.0, 0.9, 40), (0.0, 0.9, 0)])
def test_candidates_draw_the_sorted_token_on_a_128k_vocabulary(temperature: float, top_p: float, top_k: int) -> None:
    logits = mixed_logits(24, 131_072, seed=1)
    u = torch.from_numpy(np.random.default_rng(2).random(24)).float()
    fast = sample_next(logits, u, temperature, top_p, top_k, method="candidates", candidates=256)
    exact = sample_next(logits, u, temperature, top_p, top_k, method="sort")
    assert torch.equal(fast, exact)
    assert len(set(fast.tolist())) > 12  # real draws, not one token everywhere
    covered = candidate_set(torch.softmax(logits / max(temperature, 0.1), dim=-1), top_p, 256)[2]
    assert top_p >= 0.99 or 0 < int(covered.sum()) < 24  # both the candidate path and the fallback ran


def test_one_batch_mixes_covered_rows_and_rows_that_fall_back() -> None:
    logits = mixed_logits(40, 20_000, seed=3)
    probs = torch.softmax(logits, dim=-1)
    _, _, covered = candidate_set(probs, 0.9, 256)
    assert covered[0::2].all() and not covered[1::2].any()  # peaked rows covered, flat rows fall back
    for seed in range(5):  # many uniforms per row: every CDF position class is hit
        u = torch.from_numpy(np.random.default_rng(seed).random(40)).float()
        fast = sample_next(logits, u, 1.0, 0.9, 0, method="candidates", candidates=256)
        assert torch.equal(fast, sample_next(logits, u, 1.0, 0.9, 0, method="sort"))
        # a row's token does not depend on whether its neighbours fell back
        assert torch.equal(fast[0::2], sample_next(logits[0::2], u[0::2], 1.0, 0.9, 0, method="candidates",
                                                   candidates=256))


def tie_logits(vocab: int = 10) -> torch.Tensor:
    """p(9) = 0.6, then four tokens tied at 0.1 (ids 8, 2, 5, 3), the rest nearly 0."""
    p = torch.full((vocab,), 1e-13)
    p[9] = 0.6
    p[[8, 2, 5, 3]] = 0.1
    return p.log()


@pytest.mark.parametrize("candidates", [1, 2, 3, 6, 9])
def test_ties_are_drawn_in_token_id_order_whatever_the_candidate_boundary(candidates: int) -> None:
    logits = tie_logits().expand(5, -1)
    # nucleus at top_p 0.75: 9 (mass 0.6), then the tied tokens by id: 2, 3 (mass 0.8 in all)
    u = torch.tensor([0.1, 0.74, 0.8, 0.86, 0.95])
    expected = [9, 9, 2, 2, 3]  # u * 0.8 against the CDF 0.6, 0.7, 0.8
    for method in ("sort", "candidates"):
        got = sample_next(logits, u, 1.0, 0.75, 0, method=method, candidates=candidates)
        assert got.tolist() == expected, (method, candidates)


def test_a_tie_across_the_candidate_boundary_is_covered_only_when_the_nucleus_ends_before_it() -> None:
    probs = torch.softmax(tie_logits(), dim=-1).unsqueeze(0)
    _, idx, covered = candidate_set(probs, 0.75, 2)  # candidates 9 and two of the four tied tokens
    head = idx[0, :3].tolist()  # topk may return any two of the tied tokens: ordered by id all the same
    assert head[0] == 9 and head[1] < head[2] and {head[1], head[2]} <= {2, 3, 5, 8}
    assert not bool(covered[0])  # the nucleus reaches into the tie
    _, _, covered = candidate_set(probs, 0.5, 2)  # the nucleus is token 9 alone: exact from the candidates
    assert bool(covered[0])
    _, _, covered = candidate_set(probs, 0.75, 6)  # all tied tokens inside: exact
    assert bool(covered[0])


def test_a_uniform_that_rounds_to_one_takes_the_last_kept_token() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    for method in ("sort", "candidates"):
        assert sample_next(logits, torch.tensor([1.0]), 1.0, 0.75, 0, method=method).tolist() == [1]
    assert sample_next(logits, torch.tensor([1.0]), 1.0, 1.0, 0).tolist() == [3]


def chi_square_p(counts: np.ndarray, expected: np.ndarray) -> float:
    """p-value of Pearson's chi-square test of ``counts`` against probabilities ``expected``."""
    from scipy.stats import chisquare

    keep = expected > 0
    assert counts[~keep].sum() == 0, "a token outside the nucleus was drawn"
    return float(chisquare(counts[keep], expected[keep] / expected[keep].sum() * counts.sum()).pvalue)


def nucleus_probs(logits: torch.Tensor, temperature: float, top_p: float) -> np.ndarray:
    """The filtered distribution in float64: softmax(logits / T), top-p nucleus by (prob desc, id), renormalised."""
    p = torch.softmax(logits.double() / temperature, dim=-1).numpy()
    order = np.lexsort((np.arange(len(p)), -p))
    above = np.cumsum(p[order]) - p[order]
    out = np.zeros_like(p)
    out[order[above < top_p]] = p[order[above < top_p]]
    return out / out.sum()


def test_candidate_draws_follow_the_nucleus_distribution_and_the_test_can_fail() -> None:
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(400, generator=gen) * 1.5
    n = 60_000
    u = torch.from_numpy(np.random.default_rng(6).random(n)).float()
    rows = logits.expand(n, -1)
    draws = sample_next(rows, u, 0.8, 0.9, 0, method="candidates", candidates=64)
    counts = np.bincount(draws.numpy(), minlength=400)
    assert chi_square_p(counts, nucleus_probs(logits, 0.8, 0.9)) > 1e-4
    wrong_t = nucleus_probs(logits, 0.9, 0.9)  # a slightly wrong temperature must be rejected
    assert chi_square_p(counts, np.where(counts > 0, wrong_t, 0) + 0) < 1e-6


def test_method_choice() -> None:
    assert resolve_method("auto", "cpu") == "candidates" and resolve_method("auto", "cuda") == "candidates"
    assert resolve_method("auto", "mps") == "sort"  # not measured there
    assert resolve_method("sort", "cuda") == "sort" and resolve_method("candidates", "mps") == "candidates"
    with pytest.raises(ValueError, match="sampler=heap"):
        resolve_method("heap", "cpu")
    assert resolve_fallback("auto", "cpu") == "host" and resolve_fallback("auto", "cuda") == "device"
    assert resolve_fallback("host", "cuda") == "host" and resolve_fallback("device", "cpu") == "device"
    with pytest.raises(ValueError, match="sampler_fallback=gpu"):
        resolve_fallback("gpu", "cuda")
    assert [fallback_budget(n) for n in (1, 16, 17, 250, 4000)] == [1, 1, 2, 16, 250]


def logits_of(kind: str, rows: int, vocab: int, seed: int) -> torch.Tensor:
    """``peaked`` (every row Zipf-like), ``flat`` (every row near uniform) or ``mixed`` (half each)."""
    out = mixed_logits(rows * 2, vocab, seed)
    if kind == "peaked":
        return out[0::2].contiguous()
    if kind == "flat":
        return out[1::2].contiguous()
    return out[:rows].contiguous()


@pytest.mark.parametrize("kind", ["peaked", "mixed", "flat"])
def test_the_device_fallback_draws_the_sorted_token_or_says_it_overflowed(kind: str) -> None:
    rows, vocab = 48, 20_000  # budget: 3 rows a step
    logits = logits_of(kind, rows, vocab, seed=11)
    covered = candidate_set(torch.softmax(logits, dim=-1), 0.9, 256)[2]
    falling = int((~covered).sum())
    assert falling == {"peaked": 0, "mixed": rows // 2, "flat": rows}[kind]
    for seed in range(3):
        u = torch.from_numpy(np.random.default_rng(seed).random(rows)).float()
        exact = sample_next(logits, u, 1.0, 0.9, 0, method="sort")
        overflow = torch.zeros((), dtype=torch.bool)
        fast = sample_next(logits, u, 1.0, 0.9, 0, method="candidates", candidates=256, overflow=overflow)
        assert bool(overflow) == (falling > fallback_budget(rows))
        assert torch.equal(fast[covered], exact[covered])  # covered rows: the candidates' draw is the sort's
        first = (~covered).nonzero().squeeze(1)[: fallback_budget(rows)]
        assert torch.equal(fast[first], exact[first])  # the rows the budget sorted: the sort's draw
        if not bool(overflow):
            assert torch.equal(fast, exact)
        # a few rows falling back, within the budget: every token is the sort's, no overflow
        few = torch.cat([logits_of("peaked", rows - 3, vocab, seed=12), logits_of("flat", 3, vocab, seed=13)])
        overflow = torch.zeros((), dtype=torch.bool)
        fast = sample_next(few, u, 1.0, 0.9, 0, method="candidates", candidates=256, overflow=overflow)
        assert not bool(overflow) and torch.equal(fast, sample_next(few, u, 1.0, 0.9, 0, method="sort"))


def test_a_batch_smaller_than_the_budget_sorts_every_falling_row() -> None:
    logits = logits_of("flat", 1, 5_000, seed=14)
    for seed in range(5):
        u = torch.from_numpy(np.random.default_rng(seed).random(1)).float()
        overflow = torch.zeros((), dtype=torch.bool)
        fast = sample_next(logits, u, 1.0, 0.9, 0, method="candidates", candidates=64, overflow=overflow)
        assert not bool(overflow) and torch.equal(fast, sample_next(logits, u, 1.0, 0.9, 0, method="sort"))


def test_bfloat16_logits_at_temperature_one_need_no_float32_copy() -> None:
    logits = (mixed_logits(16, 8_000, seed=15) * 3).to(torch.bfloat16)
    torch.testing.assert_close(torch.softmax(logits, dim=-1, dtype=torch.float32),
                               torch.softmax(logits.float(), dim=-1), rtol=0, atol=0)
    u = torch.from_numpy(np.random.default_rng(16).random(16)).float()
    for method in ("sort", "candidates"):
        for t in (1.0, 0.7):
            assert torch.equal(sample_next(logits, u, t, 0.9, 0, method=method, candidates=256),
                               sample_next(logits.float(), u, t, 0.9, 0, method=method, candidates=256))
