"""How many rows of a real model fall back from the candidate set to the sort, per decode step.

``sampler_fallback=device`` sorts a fixed budget of rows every step (``FALLBACK_ROWS_SHARE`` of the batch);
when more rows fall back in one step the call is decoded again with the host read, which the backend then
keeps. This prints, for each model named, the share of rows whose top-p nucleus at RTP settings (T 1,
top-p 0.9) is not covered by ``NUCLEUS_CANDIDATES`` candidates: its mean over the steps, its largest value
in one step, and how many steps had any. Rows are RTP prompts (../shared/data/rtp, toxic and nontoxic
halves), left-padded, each step a full forward pass (no cache: a few steps on the CPU suffice).

    python benchmarks/bench_fallback_share.py [--prompts 32] [--steps 12] smollm2-135m-instruct gemma-3-270m

Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from polytox.generation.sampling import FALLBACK_ROWS_SHARE, NUCLEUS_CANDIDATES, candidate_set, sample_next
from polytox.models import resolve_model

RTP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "rtp"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rtp", type=Path, default=RTP)
    args = parser.parse_args()
    texts: list[str] = []
    for name in ("toxic.jsonl", "nontoxic.jsonl"):
        with (args.rtp / name).open(encoding="utf-8") as fh:
            texts += [json.loads(line)["prompt"]["text"] for _, line in zip(range(args.prompts // 2), fh, strict=False)]
    print(f"{len(texts)} RTP prompts, T 1, top-p 0.9, {NUCLEUS_CANDIDATES} candidates; the device fallback's "
          f"budget: {FALLBACK_ROWS_SHARE:.1%} of the rows")
    for model_name in args.models:
        path, _ = resolve_model(model_name)
        tok = AutoTokenizer.from_pretrained(path)
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        enc = tok(texts, return_tensors="pt", padding=True)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        gen = torch.Generator().manual_seed(0)
        shares = []
        with torch.inference_mode():
            for _ in range(args.steps):
                logits = lm(input_ids=ids, attention_mask=mask).logits[:, -1, :].float()
                covered = candidate_set(torch.softmax(logits, dim=-1), 0.9, NUCLEUS_CANDIDATES)[2]
                shares.append(float((~covered).float().mean()))
                nxt = sample_next(logits, torch.rand(len(texts), generator=gen), 1.0, 0.9, 0)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                mask = torch.cat([mask, torch.ones(len(texts), 1, dtype=mask.dtype)], dim=1)
        print(f"{model_name} (vocabulary {logits.shape[-1]:,}): falling back {np.mean(shares):.1%} of the rows "
              f"on average, {max(shares):.1%} at most in one step; {sum(s > 0 for s in shares)}/{args.steps} "
              "steps had some", flush=True)


if __name__ == "__main__":
    main()
