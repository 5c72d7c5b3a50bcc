"""Raw head outputs of every RTP-LX text in ``../shared/data/rtp-lx`` (both head modes), for the
cross-language scale study (``lx_scale_trial.py``). One parquet file per mode; resumes per chunk.

    python -m research.scorer.lx_raw --shared ../shared/data --out /tmp/lx-raw
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from polytox.scoring.ml.data import load_rtplx
    from polytox.scoring.ml.scale_rows import raw_outputs

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shared", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default="ngram,full")
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    rows = load_rtplx(Path(args.shared) / "rtp-lx")
    todo = sorted({(r.text, r.lang) for r in rows})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for mode in args.modes.split(","):
        started = time.perf_counter()
        for n, start in enumerate(range(0, len(todo), args.chunk)):
            part = out / f"part-{n:04d}-{mode}.parquet"
            if part.exists():
                continue
            chunk = todo[start:start + args.chunk]
            raw = raw_outputs([t for t, _ in chunk], [lang for _, lang in chunk], mode, args.threads)
            pq.write_table(pa.table({"text": [t for t, _ in chunk], "lang": [lang for _, lang in chunk], "raw": raw}),
                           str(part) + ".tmp")
            Path(str(part) + ".tmp").rename(part)
            print(f"{mode}: {start + len(chunk)}/{len(todo)} {time.perf_counter() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
