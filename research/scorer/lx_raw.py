"""Raw head outputs of every RTP-LX text in ``../shared/data/rtp-lx`` (both head modes), for the
cross-language scale study (``lx_scale_trial.py``). One parquet file per mode; resumes per chunk.

    python -m research.scorer.lx_raw --shared ../shared/data --out /tmp/lx-raw
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from polytox.training.scorer.data import load_rtplx
    from polytox.training.scorer.scale_rows import raw_outputs

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shared", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default="ngram,full")
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--heldout-only", action="store_true",
                   help="only the texts of the head's held-out split (what lx_scale_trial fits and checks on)")
    args = p.parse_args(argv)
    rows = load_rtplx(Path(args.shared) / "rtp-lx")
    todo = sorted({(r.text, r.lang) for r in rows})
    prefix = "part"
    if args.heldout_only:
        from polytox.training.scorer.scale_fit import load_raw
        from polytox.training.scorer.scale_rows import RATERS, scale_rows

        held = {(r.text, r.lang) for r in scale_rows(args.shared) if r.source == "rtp-lx" and r.target == RATERS
                and r.heldout}
        todo = [t for t in todo if t in held]
        prefix = "part-held"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for mode in args.modes.split(","):
        started = time.perf_counter()
        mode_todo = todo
        if args.heldout_only:
            done = load_raw(out, mode)
            mode_todo = [t for t in todo if t not in done]
        for n, start in enumerate(range(0, len(mode_todo), args.chunk)):
            chunk = mode_todo[start:start + args.chunk]
            # a held-out run names its parts by their texts (what is left to do shrinks between runs)
            name = f"{n:04d}" if not args.heldout_only else hashlib.sha256(repr(chunk).encode()).hexdigest()[:12]
            part = out / f"{prefix}-{name}-{mode}.parquet"
            if part.exists():
                continue
            raw = raw_outputs([t for t, _ in chunk], [lang for _, lang in chunk], mode, args.threads)
            pq.write_table(pa.table({"text": [t for t, _ in chunk], "lang": [lang for _, lang in chunk], "raw": raw}),
                           str(part) + ".tmp")
            Path(str(part) + ".tmp").rename(part)
            print(f"{mode}: {start + len(chunk)}/{len(mode_todo)} {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
