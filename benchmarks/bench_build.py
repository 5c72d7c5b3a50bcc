"""Scale of ``polytox build``: wall time and peak memory as the corpus grows, streaming vs. in memory.

Corpora of N documents are made from the real RTP-LX prompts in ../shared/data (each document joins 5
prompts of one language, with its index, so every document is distinct). Each measurement runs in a fresh
subprocess, so peak RSS (``ru_maxrss``) belongs to that run alone.

- streaming: ``polytox.promptset.build`` (PTP mode, fake scorer through the score cache, language check on,
  shards of 1,000 documents), the whole pipeline to the written prompt set;
- in memory (baseline): the same read, language check, scoring and per-bin sampling, holding every
  document in a Python list, as a script without the streaming pipeline would;
- resume: rerunning the finished build (every shard is skipped).

Usage: ``python benchmarks/bench_build.py [--sizes 5000,20000,80000]``. Timings on a shared 2-core machine
are noisy; compare the columns of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "rtp-lx"

STREAMING = """
import json, resource, sys, time
from polytox.promptset import BuildSpec, CorpusSource, build
corpus, out, cache = sys.argv[1:4]
spec = BuildSpec(source=CorpusSource(paths=(corpus,)), scorer="fake", scorer_options=(("cache", cache),),
                 per_bin=50, small_per_lang=20, shard_size=1000)
t = time.perf_counter()
result = build(spec, out)
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kept": result.report["scan"]["kept"], "skipped": result.report["scan"]["shards_skipped"]}))
"""

IN_MEMORY = """
import hashlib, json, resource, sys, time
from collections import defaultdict
from polytox.constants import toxicity_bucket
from polytox.langs.detect import detect_language
from polytox.scoring import build_scorer
corpus, out, cache = sys.argv[1:4]
t = time.perf_counter()
docs = [json.loads(line) for line in open(corpus, encoding="utf-8")]
docs = [d for d in docs if detect_language(d["text"]) == d["lang"]]
scorer = build_scorer("fake", {"cache": cache})
scores = scorer.score([d["text"] for d in docs], [d["lang"] for d in docs])
strata = defaultdict(list)
for d, s in zip(docs, scores):
    strata[(d["lang"], toxicity_bucket(s.get("toxicity")))].append(d)
chosen = [d for v in strata.values() for d in sorted(v, key=lambda d: hashlib.md5(d["id"].encode()).hexdigest())[:50]]
with open(out, "w", encoding="utf-8") as fh:
    for d in chosen:
        n = len(d["text"]) // 2
        fh.write(json.dumps({"prompt": d["text"][:n], "continuation": d["text"][n:]}, ensure_ascii=False) + "\\n")
print(json.dumps({"s": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kept": len(docs)}))
"""


def make_corpus(path: Path, n: int) -> None:
    by_lang: dict[str, list[str]] = {}
    for file in sorted(DATA.glob("RTP_LX_*.jsonl")):
        lang = file.stem.split("_")[-1].lower().split("-")[0]
        with open(file, encoding="utf-8") as fh:
            by_lang[lang] = [json.loads(line)["Prompt"] for line in fh if line.strip()]
    langs = sorted(by_lang)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            lang = langs[i % len(langs)]
            pool = by_lang[lang]
            k = i // len(langs)
            text = " ".join(pool[(k * 5 + j) % len(pool)] for j in range(5)) + f" {i}"
            fh.write(json.dumps({"id": f"d{i}", "lang": lang, "text": text}, ensure_ascii=False) + "\n")


def run(code: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="5000,20000,80000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for n in sizes:
            corpus = tmp / f"corpus-{n}.jsonl"
            make_corpus(corpus, n)
            mb = corpus.stat().st_size / 2**20
            stream = run(STREAMING, str(corpus), str(tmp / f"build-{n}"), str(tmp / f"cache-s-{n}.sqlite"))
            resume = run(STREAMING, str(corpus), str(tmp / f"build-{n}"), str(tmp / f"cache-s-{n}.sqlite"))
            memory = run(IN_MEMORY, str(corpus), str(tmp / f"mem-{n}.jsonl"), str(tmp / f"cache-m-{n}.sqlite"))
            assert stream["kept"] == memory["kept"], (stream, memory)
            rows.append((n, mb, stream, resume, memory))
            print(f"  done N={n}", file=sys.stderr)
    header = ("documents", "corpus MB", "streaming s", "streaming peak MB", "docs/s", "resume s",
              "in-memory s", "in-memory peak MB")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" ---: " for _ in header) + "|")
    for n, mb, s, r, m in rows:
        print(f"| {n:,} | {mb:.1f} | {s['s']:.1f} | {s['rss_mb']:.0f} | {n / s['s']:,.0f} | {r['s']:.1f} | "
              f"{m['s']:.1f} | {m['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
