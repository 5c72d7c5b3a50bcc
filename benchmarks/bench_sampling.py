"""The nucleus sampler alone: full-vocabulary sort vs ``topk`` candidate set, at a 128K vocabulary.

Rows of logits shaped like a trained model's (Zipf-like, ``p(rank) ~ rank^-a`` with ``a`` in 1.5..2.2,
a random token order per row), of a near-uniform model (random weights: every nucleus is wider than the
candidate set, so every row falls back), and a batch mixing both. Each cell: median milliseconds per
``sample_next`` call over ``--reps`` calls (after one warm-up), and the share of rows the candidate set
covered. Every call's tokens are checked equal between the methods. ``device`` is the candidate set with its
fallback rows decided on the device (``sampler_fallback=device``: a fixed budget of rows sorted every step, no
host read); ``overflow`` says when more rows fell back than that budget (the decoder would then decode the call
again with the host read).

    python benchmarks/bench_sampling.py [--rows 256] [--vocab 131072] [--reps 5] [--device cpu|cuda]

Prints a table; nothing here is a test (tests/test_sampling.py proves the equality).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from polytox.generation.sampling import NUCLEUS_CANDIDATES, candidate_set, fallback_budget, sample_next


def logits_of(kind: str, rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """``rows x vocab`` float32 logits: ``peaked`` (Zipf-like), ``flat`` (near uniform) or ``mixed`` (half each)."""
    gen = torch.Generator().manual_seed(seed)
    log_rank = torch.arange(1, vocab + 1, dtype=torch.float32).log()
    out = torch.empty(rows, vocab)
    for r in range(rows):
        if kind == "flat" or (kind == "mixed" and r % 2):
            out[r] = torch.randn(vocab, generator=gen) * 0.2
        else:
            alpha = 1.5 + 0.7 * float(torch.rand(1, generator=gen))
            out[r] = (-alpha * log_rank)[torch.randperm(vocab, generator=gen)]
    return out


def timed(fn: object, reps: int, device: str) -> tuple[float, torch.Tensor]:
    """Median seconds of ``fn()`` over ``reps`` calls after one warm-up, and its last result."""
    result = fn()  # type: ignore[operator]
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = fn()  # type: ignore[operator]
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=131_072)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    u = torch.rand(args.rows, generator=torch.Generator().manual_seed(1)).to(args.device)
    print(f"sampler alone: {args.rows} rows x {args.vocab} vocabulary, top_p {args.top_p}, T 1, "
          f"{NUCLEUS_CANDIDATES} candidates, device {args.device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} CPU threads")
    print(f"device fallback budget: {fallback_budget(args.rows)} rows")
    print(f"{'logits':<8} {'covered':>8} {'sort ms':>9} {'candidates ms':>14} {'speed-up':>9} {'device ms':>10} "
          f"{'speed-up':>9} {'overflow':>9}  same tokens")
    for kind in ("peaked", "mixed", "flat"):
        logits = logits_of(kind, args.rows, args.vocab).to(args.device)
        covered = candidate_set(torch.softmax(logits, dim=-1), args.top_p, NUCLEUS_CANDIDATES)[2]
        t_sort, a = timed(lambda logits=logits: sample_next(logits, u, 1.0, args.top_p, 0, method="sort"),
                          args.reps, args.device)
        t_cand, b = timed(lambda logits=logits: sample_next(logits, u, 1.0, args.top_p, 0, method="candidates"),
                          args.reps, args.device)
        overflow = torch.zeros((), dtype=torch.bool, device=args.device)
        def device(logits: torch.Tensor = logits, overflow: torch.Tensor = overflow) -> torch.Tensor:
            return sample_next(logits, u, 1.0, args.top_p, 0, method="candidates", overflow=overflow)

        t_dev, c = timed(device, args.reps, args.device)
        same = bool(torch.equal(a, b)) and (bool(overflow) or bool(torch.equal(a, c)))
        print(f"{kind:<8} {float(covered.float().mean()):>8.0%} {t_sort * 1e3:>9.1f} {t_cand * 1e3:>14.1f} "
              f"{t_sort / t_cand:>8.2f}x {t_dev * 1e3:>10.1f} {t_sort / t_dev:>8.2f}x {bool(overflow)!s:>9}  {same}")


if __name__ == "__main__":
    main()
