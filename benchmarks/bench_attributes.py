"""Cost of polytox-ml's attributes: texts/s of TOXICITY alone vs all eight, side by side on the CPU.

Both scorers read the same English texts (FLIRTATION is read in English only), in rounds that alternate
which goes first, in one process, so the load of a shared machine falls on both alike. The attribute heads
reuse the toxicity path's n-gram features and pools: the extra cost is their matrix products alone.

    PYTHONPATH=src python benchmarks/bench_attributes.py --texts 32 --rounds 3 [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def rtp_texts(shared: Path, n: int) -> list[str]:
    """The first ``n`` RTP prompts and continuations of the shared folder, in file order."""
    out: list[str] = []
    with (shared / "rtp" / "toxic.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            out += [record["prompt"]["text"], record["continuation"]["text"]]
            if len(out) >= n:
                break
    return out[:n]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--shared", type=Path, default=SHARED)
    args = p.parse_args()
    import torch

    from polytox.scoring.ml.scorer import PolytoxMlScorer

    torch.set_num_threads(args.threads)
    texts = rtp_texts(args.shared, args.texts)
    langs = ["en"] * len(texts)
    scorers = {"toxicity": PolytoxMlScorer(), "all eight": PolytoxMlScorer(attributes="rtp")}
    for s in scorers.values():  # load the backbone once each, outside the timing
        s.score_batch(texts[:2], langs[:2])
    seconds: dict[str, list[float]] = {k: [] for k in scorers}
    for r in range(args.rounds):
        order = list(scorers) if r % 2 == 0 else list(reversed(scorers))
        for name in order:
            started = time.perf_counter()
            scorers[name].score_batch(texts, langs)
            seconds[name].append(time.perf_counter() - started)
    rate = {k: len(texts) / statistics.median(v) for k, v in seconds.items()}
    ratio = statistics.median(a / b for a, b in zip(seconds["all eight"], seconds["toxicity"], strict=True))
    print(
        json.dumps(
            {
                "texts": len(texts),
                "rounds": args.rounds,
                "texts_per_s": rate,
                "seconds": seconds,
                "cost_all_eight_over_toxicity": round(ratio, 3),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
