"""Perspective pacing: sustained rate as a share of the quota, scores lost, share of requests hitting 429.

Runs against the contract server of the tests (a real HTTP server on 127.0.0.1 enforcing a per-second
quota with 429s, injecting 5xx errors and slow responses), side by side with the baseline the peers use:
one request at a time with ``sleep(1 / qps)`` between requests and a fixed 1 s sleep after a 429.

Targets (issue 4): sustained rate >= 95% of the quota, 0 scores lost, <= 10% of requests answered 429.

    python benchmarks/bench_perspective.py [--qps 20] [--seconds 10] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from perspective_server import FakePerspective  # noqa: E402
from polytox.scoring.perspective import PerspectiveScorer  # noqa: E402

KEY = "bench-key"


def naive(server: FakePerspective, texts: list[str], qps: float) -> dict[str, Any]:
    """The peers' loop: sequential, sleep 1/qps after each request, sleep 1 s and retry after a 429."""
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    scored = 0
    for text in texts:
        for _ in range(20):
            body = json.dumps({"comment": {"text": text}, "requestedAttributes": {"TOXICITY": {}},
                               "languages": ["en"], "doNotStore": True})
            conn.request("POST", f"/v1alpha1/comments:analyze?key={KEY}", body=body,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            time.sleep(1.0 / qps)
            if resp.status == 200:
                scored += 1
                break
            if resp.status == 429:
                time.sleep(1.0)
    conn.close()
    return {"scored": scored}


def polytox(server: FakePerspective, texts: list[str], qps: float, archive: Path) -> dict[str, Any]:
    scorer = PerspectiveScorer(url=server.url, qps=qps, timeout=5.0, backoff=0.25, backoff_max=4.0,
                               archive=str(archive))
    scores = scorer.score(texts, ["en"] * len(texts))
    scorer.close()
    return {"scored": sum(s.ok for s in scores)}


def polytox_score_path(server: FakePerspective, texts: list[str], qps: float,
                       archive: Path) -> dict[str, Any]:
    """The ``polytox score`` path: cache in front, 32-text chunks, several chunks in flight."""
    from polytox.scoring import build_scorer
    from polytox.scoring.score_file import score_rows
    from polytox.scoring.textio import TextRow

    scorer = build_scorer("perspective", {"url": server.url, "qps": str(qps), "timeout": "5",
                                          "backoff": "0.25", "backoff_max": "4", "archive": str(archive),
                                          "cache": str(archive.with_suffix(".cache"))})
    rows = [TextRow(i, f"row {i}", str(i), t, "en") for i, t in enumerate(texts)]
    scores = score_rows(scorer, rows)
    scorer.close()
    return {"scored": sum(s.ok for s in scores)}


def run(name: str, fn: Any, qps: float, n: int, server_opts: dict[str, Any], tmp: Path) -> dict[str, Any]:
    texts = [f"{name} text {i}, you idiot" if i % 7 == 0 else f"{name} text {i}" for i in range(n)]
    with FakePerspective(key=KEY, qps=qps, seed=1, **server_opts) as server:
        start = time.monotonic()
        out = fn(server, texts, qps) if fn is naive else fn(server, texts, qps, tmp / f"{name}.sqlite")
        elapsed = time.monotonic() - start
    requests = server.count()
    arrivals = sorted(r.t for r in server.log if r.status != 429)
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {"name": name, "texts": n, "scored": out["scored"], "lost": n - out["scored"], "elapsed": elapsed,
            "end_to_end": out["scored"] / elapsed / qps, "sustained": (len(arrivals) - 1) / span / qps,
            "requests": requests, "share_429": server.count(429) / requests if requests else 0.0,
            "n_5xx": sum(server.count(s) for s in (500, 503)), "max_1s": server.max_in_window()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qps", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=10.0, help="quota-seconds of work per configuration")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency per request (s)")
    args = parser.parse_args()
    os.environ["PERSPECTIVE_API_KEY"] = KEY
    n = int(args.qps * args.seconds)
    clean = {"latency_s": args.latency}
    faulty = {"latency_s": args.latency, "error_rate": 0.03, "slow_rate": 0.03, "slow_s": 1.0}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            # The baseline runs at a steady (slow) rate: half the texts measure it as well, in half the time.
            run("baseline sequential+sleep, clean", naive, args.qps, n // 2, clean, Path(tmp)),
            run("polytox, clean", polytox, args.qps, n, clean, Path(tmp)),
            run("baseline sequential+sleep, faults", naive, args.qps, n // 2, faulty, Path(tmp)),
            run("polytox, faults", polytox, args.qps, n, faulty, Path(tmp)),
            run("polytox score path (cache), faults", polytox_score_path, args.qps, n, faulty, Path(tmp)),
        ]
    print(f"\nPerspective pacing against the contract server: quota {args.qps:g} qps (sliding 1 s window), "
          f"server latency {args.latency * 1000:.0f} ms; faults = 3% 503 + 3% responses delayed 1 s\n")
    head = (f"{'configuration':36} {'texts':>6} {'scored':>7} {'lost':>5} {'time s':>7} {'sustained':>10} "
            f"{'end-to-end':>11} {'requests':>9} {'429 share':>10} {'5xx':>4} {'max in 1 s':>11}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:36} {r['texts']:>6} {r['scored']:>7} {r['lost']:>5} {r['elapsed']:>7.1f} "
              f"{r['sustained']:>10.1%} {r['end_to_end']:>11.1%} {r['requests']:>9} {r['share_429']:>10.1%} "
              f"{r['n_5xx']:>4} {r['max_1s']:>11}")
    print("\nsustained = requests the server accepted per second between the first and the last one, "
          "as a share of the quota (target >= 95%);\nend-to-end = texts scored per second of wall time, as a "
          "share of the quota (includes the last responses' latency, and\nwith faults the quota that retried "
          "5xx answers took). Targets: 0 lost, 429 share <= 10%.")


if __name__ == "__main__":
    main()
