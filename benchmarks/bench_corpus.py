"""Corpus analysis at scale: a >= 1M-document synthetic corpus of real texts, scored, counted and de-duplicated.

One run prints every table side by side with its simple baseline:

1. **Corpus.** ``--docs`` documents (default 1,000,000) drawn with a seeded RNG from the real texts in
   ``../shared/data`` (scorer-train, RTP, RTP-LX: ~300K texts, 17 languages), with Zipf-distributed
   synthetic URLs over ``--domains`` sites (3% without URL, 0.1% empty). A share ``--plant`` of the
   documents are planted near-duplicates: a copy of an earlier document with one character substituted
   per 150 (at least one). Which base text each document came from is kept, so the overlap truth is known.
2. **Scoring** (``corpus score``, polytox-ml ``mode=ngram``) on growing prefixes of that corpus, each in
   its own process: documents/s and peak RSS per size (flat = memory does not grow with the corpus).
   Baseline: the bare scorer over the same texts in one loop (no parsing, parts or resume). The default
   scorer (n-grams + gemma-3-270m hidden states) is timed on a ``--default-sample`` and extrapolated.
3. **Stats** (``corpus stats``, DuckDB over the parts) per size: seconds and peak RSS, against loading the
   parts into memory with pyarrow (the simple way, whose memory grows with the corpus).
4. **Overlap**: A = the first ``--overlap-a`` documents, B = the next ``--overlap-b``; recall and
   precision against the planted truth (B documents whose base text also appears in A with exact
   Jaccard >= 0.9), against an exact-hash-only baseline.
5. **Ray**: the same scoring slice on Ray Data with 1 and 2 scoring actors.
6. **Extrapolation** to OWTC (8,013,769 documents) on one CPU node and one GPU node (labelled).

    nice -n 10 python benchmarks/bench_corpus.py                  # full run (~10 min on 2 shared cores)
    python benchmarks/bench_corpus.py --docs 3000 --sizes 500,1500 --overlap-a 800 --overlap-b 400 \\
        --default-sample 0 --ray-docs 0                            # CI smoke size (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OWTC_DOCS = 8_013_769  # OpenWebText Corpus documents (Gokaslan & Cohen 2019; RTP §6: "about 8M")
NGRAM = {"mode": "ngram", "cache": "off"}
# GPU extrapolation assumptions (not measured here: no GPU on this machine).
GPU_EFFECTIVE_FLOPS = 100e12  # an H100 at ~10% of its dense bf16 peak on a small model
GEMMA_PARAMS_USED = 50e6  # non-embedding parameters of gemma-3-270m up to layer 9 (of 18) that the head reads
HEAD_MAX_TOKENS = 128


# ---- 1. the corpus ---------------------------------------------------------------------------------------
def real_texts(data: Path) -> list[tuple[str, str]]:
    """(text, lang) of every real text in the shared data."""
    out: list[tuple[str, str]] = []
    for name in ("en-human.jsonl", "en-perspective.jsonl", "multilingual-human.jsonl"):
        with open(data / "scorer-train" / name, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                out.append((rec["text"], rec.get("lang") or "en"))
    for name in ("toxic.jsonl", "nontoxic.jsonl"):
        with open(data / "rtp" / name, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                out.append((rec["prompt"]["text"] + rec["continuation"]["text"], "en"))
    for path in sorted((data / "rtp-lx").glob("RTP_LX_*.jsonl")):
        lang = path.stem.split("_")[-1].split("-")[0].lower()
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                out.append((json.loads(line)["Prompt"], lang))
    return [(t, lang) for t, lang in out if t.strip()]


def edit(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(max(1, len(chars) // 150)):
        i = rng.randrange(len(chars))
        chars[i] = "#" if chars[i] != "#" else "%"
    return "".join(chars)


def build_corpus(folder: Path, n_docs: int, n_domains: int, plant: float, seed: int) -> dict[str, Any]:
    """Write the corpus as 4 JSONL files; return the base-text index of every document and timings."""
    import numpy as np

    start = time.perf_counter()
    pool = real_texts(DATA)
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    domain_ranks = nprng.zipf(1.3, size=n_docs) % n_domains
    base = np.empty(n_docs, dtype=np.int64)
    planted = np.zeros(n_docs, dtype=bool)
    texts_of: dict[int, str] = {}  # documents that were edited copies keep their text for the truth
    folder.mkdir(parents=True, exist_ok=True)
    files = [open(folder / f"corpus-{k}.jsonl", "w", encoding="utf-8") for k in range(4)]  # noqa: SIM115
    per_file = -(-n_docs // 4)
    try:
        for i in range(n_docs):
            if i and rng.random() < plant:
                j = rng.randrange(i)
                base[i], planted[i] = base[j], True
                source = texts_of.get(j, pool[base[j]][0])
                text, lang = edit(source, rng), pool[base[j]][1]
                texts_of[i] = text
            else:
                base[i] = rng.randrange(len(pool))
                text, lang = pool[base[i]]
                if rng.random() < 0.001:
                    text = "   "
                    texts_of[i] = text  # the truth must see the emptied text, not the pool's
            doc: dict[str, Any] = {"id": f"doc{i}", "text": text, "lang": lang}
            if rng.random() >= 0.03:
                d = int(domain_ranks[i])
                doc["url"] = f"https://{('www.', 'news.', '')[d % 3]}site{d}.{('com', 'co.uk', 'org')[d % 3]}/{i}"
            files[i // per_file].write(json.dumps(doc, ensure_ascii=False) + "\n")
    finally:
        for fh in files:
            fh.close()
    return {"base": base, "planted": planted, "edited": texts_of, "pool": pool,
            "seconds": time.perf_counter() - start, "pool_size": len(pool),
            "bytes": sum(f.stat().st_size for f in folder.glob("*.jsonl"))}


# ---- child processes: one measurement each, peak RSS read by the parent --------------------------------
def child(task: dict[str, Any]) -> None:
    from polytox.promptset.readers import CorpusSource, FieldMap

    kind = task["kind"]
    start = time.perf_counter()
    out: dict[str, Any] = {}
    if kind == "score":
        from polytox.corpus.score import ScoreJob, run_score
        from polytox.executors import ExecutorConfig

        job = ScoreJob(source=CorpusSource(paths=tuple(task["paths"]), limit=task["limit"]),
                       fields=FieldMap(), scorer=task["scorer"], scorer_options=task["options"],
                       shard_size=task.get("shard_size", 5000), detect_lang=False)
        executor = ExecutorConfig(kind=task.get("executor", "serial"), score_workers=task.get("workers", 1),
                                  cpus_per_worker=task.get("cpus", 1.0))
        summary = run_score(job, task["out"], executor=executor)
        out = {"docs": summary.documents_scored_now, "seconds": summary.seconds,
               "status_counts": summary.status_counts, "executor": summary.executor}
    elif kind == "bare":
        from polytox.scoring import build_scorer

        texts, langs = [], []
        with open(task["paths"][0], encoding="utf-8") as fh:
            for line in fh:
                if len(texts) >= task["limit"]:
                    break
                rec = json.loads(line)
                if rec["text"].strip():
                    texts.append(rec["text"])
                    langs.append(rec["lang"])
        scorer = build_scorer(task["scorer"], task["options"])
        t0 = time.perf_counter()
        warm = task.get("warmup", 0)
        if warm:  # the first batch loads the model: timed apart
            scorer.score(texts[:warm], langs[:warm])
        t1 = time.perf_counter()
        scores = scorer.score(texts[warm:], langs[warm:])
        out = {"docs": len(scores), "seconds": time.perf_counter() - t1, "load_seconds": t1 - t0}
    elif kind == "stats":
        from polytox.corpus.stats import compute_corpus_stats

        stats = compute_corpus_stats(task["out"], n_boot=1000)
        out = {"share": stats["share_toxic"]["toxicity"]["share"], "n": stats["n_scored"],
               "seconds": time.perf_counter() - start}
    elif kind == "stats-baseline":
        import numpy as np
        import pyarrow.parquet as pq

        table = pq.read_table(Path(task["out"]) / "parts")
        tox = table.column("toxicity").to_numpy(zero_copy_only=False)
        ok = np.array(table.column("status").to_pylist()) == "ok"
        out = {"share": float(np.mean(tox[ok] >= 0.5)), "seconds": time.perf_counter() - start}
    import resource

    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # this process (Linux: KiB)
    print("RESULT " + json.dumps(out, default=str), flush=True)


def run_child(task: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in a fresh process; its result with the process's own peak RSS (MiB; Ray's
    worker processes are not included)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(task)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"child {task['kind']} failed: {proc.stderr[-2000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line[7:])
    return result


# ---- the overlap truth ------------------------------------------------------------------------------------
def overlap_truth(corpus: dict[str, Any], n_a: int, n_b: int) -> set[int]:
    """B documents (index in the corpus) whose base text is in A with exact Jaccard >= 0.9."""
    from polytox.promptset.dedup import jaccard, shingles

    base, pool, edited = corpus["base"], corpus["pool"], corpus["edited"]

    def text(i: int) -> str:
        return edited[i] if i in edited else pool[int(base[i])][0]

    in_a: dict[int, list[int]] = {}
    for i in range(n_a):
        in_a.setdefault(int(base[i]), []).append(i)
    truth = set()
    for i in range(n_a, n_a + n_b):
        t = text(i)
        if not t.strip():
            continue
        s = shingles(t)
        if any(jaccard(s, shingles(text(j))) >= 0.9 for j in in_a.get(int(base[i]), ())):
            truth.add(i)
    return truth


def slice_jsonl(src_folder: Path, dst: Path, start: int, stop: int) -> None:
    """Documents [start, stop) of the corpus files as one JSONL file."""
    n = 0
    with open(dst, "w", encoding="utf-8") as out:
        for path in sorted(src_folder.glob("corpus-*.jsonl")):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if start <= n < stop:
                        out.write(line)
                    n += 1
                    if n >= stop:
                        return


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--domains", type=int, default=5_000)
    p.add_argument("--plant", type=float, default=0.05, help="share of planted near-duplicates")
    p.add_argument("--sizes", default="25000,75000,200000", help="scoring/stats sizes (corpus prefixes)")
    p.add_argument("--default-sample", type=int, default=100, help="documents timed with the default scorer")
    p.add_argument("--overlap-a", type=int, default=30_000)
    p.add_argument("--overlap-b", type=int, default=15_000)
    p.add_argument("--check-sample", type=int, default=300)
    p.add_argument("--ray-docs", type=int, default=20_000, help="documents scored on Ray (0: skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write every number to this file")
    args = p.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["POLYTOX_CACHE_DIR"] = str(tmp / "cache")
        corpus = build_corpus(tmp / "corpus", args.docs, args.domains, args.plant, args.seed)
        paths = [str(x) for x in sorted((tmp / "corpus").glob("corpus-*.jsonl"))]
        print(f"## corpus: {args.docs:,} documents from {corpus['pool_size']:,} real texts "
              f"({corpus['bytes'] / 2**20:.0f} MiB JSONL, {int(corpus['planted'].sum()):,} planted near-duplicates, "
              f"built in {corpus['seconds']:.0f} s); {os.cpu_count()} CPUs, load average "
              f"{report['load_avg_start'][0]:.1f}\n")
        report["corpus"] = {k: corpus[k] for k in ("seconds", "pool_size", "bytes")}

        # 2 + 3. scoring and stats per size
        rows = []
        for size in sizes:
            out = str(tmp / f"scores-{size}")
            score = run_child({"kind": "score", "paths": paths, "limit": size, "scorer": "polytox-ml",
                               "options": NGRAM, "out": out})
            stats = run_child({"kind": "stats", "out": out})
            base_stats = run_child({"kind": "stats-baseline", "out": out})
            rows.append({"size": size, "score": score, "stats": stats, "stats_baseline": base_stats})
        bare = run_child({"kind": "bare", "paths": paths[:1], "limit": min(sizes[-1], args.docs // 4),
                          "scorer": "polytox-ml", "options": NGRAM})
        report["scoring"], report["bare_scorer"] = rows, bare
        print("## scoring (polytox-ml mode=ngram) and stats, per corpus size; each in a fresh process\n")
        print("| documents | score docs/s | score peak RSS MiB | stats s | stats peak RSS MiB | "
              "baseline: pyarrow load s | baseline peak RSS MiB | same toxic share |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            s, st, b = r["score"], r["stats"], r["stats_baseline"]
            print(f"| {r['size']:,} | {s['docs'] / s['seconds']:,.0f} | {s['peak_rss_mib']:.0f} | "
                  f"{st['seconds']:.2f} | {st['peak_rss_mib']:.0f} | {b['seconds']:.2f} | {b['peak_rss_mib']:.0f} | "
                  f"{abs(st['share'] - b['share']) < 1e-12} |")
        print(f"\nbaseline, the bare scorer in one call over {bare['docs']:,} texts (no parsing, parts, resume): "
              f"{bare['docs'] / bare['seconds']:,.0f} docs/s, peak RSS {bare['peak_rss_mib']:.0f} MiB\n")
        if args.default_sample:
            default = run_child({"kind": "bare", "paths": paths[:1], "limit": args.default_sample + 8,
                                 "scorer": "default", "options": {"cache": "off"}, "warmup": 8})
            report["default_scorer"] = default
            print(f"default scorer (n-grams + gemma-3-270m hidden states, CPU) on a sample of "
                  f"{default['docs']} documents after an 8-document warm-up ({default['load_seconds']:.0f} s with "
                  f"the model load): {default['docs'] / default['seconds']:.2f} docs/s (measured on the sample; "
                  "every larger figure for it below is extrapolated)\n")

        # 4. overlap
        n_a, n_b = args.overlap_a, args.overlap_b
        slice_jsonl(tmp / "corpus", tmp / "a.jsonl", 0, n_a)
        slice_jsonl(tmp / "corpus", tmp / "b.jsonl", n_a, n_a + n_b)
        from polytox.corpus.overlap import build_index, query
        from polytox.promptset.readers import CorpusSource, FieldMap

        truth = overlap_truth(corpus, n_a, n_b)
        t0 = time.perf_counter()
        index = build_index(CorpusSource(paths=(str(tmp / "a.jsonl"),)), FieldMap(), tmp / "idx")
        index_s = time.perf_counter() - t0
        result = query(index, CorpusSource(paths=(str(tmp / "b.jsonl"),)), FieldMap(), tmp / "ov",
                       check_sample=args.check_sample, seed=args.seed)
        import pyarrow.parquet as pq

        verdicts = pq.read_table(tmp / "ov" / "overlap.parquet", columns=["doc_id", "verdict"]).to_pylist()
        found = {int(v["doc_id"][3:]) for v in verdicts if v["verdict"] in ("exact", "near")}
        exact_only = {int(v["doc_id"][3:]) for v in verdicts if v["verdict"] == "exact"}

        def pr(hits: set[int]) -> tuple[float, float]:
            tp = len(hits & truth)
            return (tp / len(truth) if truth else 1.0, tp / len(hits) if hits else 1.0)

        rec, prec = pr(found)
        rec0, prec0 = pr(exact_only)
        # every B document against all of A by exact Jaccard (the exact prefix-filter join): the full truth,
        # which also holds the near-duplicates the source data already had (RTP texts in two datasets)
        from polytox.corpus.overlap import exact_truth

        t1 = time.perf_counter()
        b_texts = [json.loads(line)["text"] for line in open(tmp / "b.jsonl", encoding="utf-8")]  # noqa: SIM115
        full = exact_truth(index, [t if t.strip() else "\x00" for t in b_texts], 0.9)
        exact_s = time.perf_counter() - t1
        full_truth = {n_a + k for k, hit in enumerate(full) if hit and b_texts[k].strip()}
        tp_full = len(found & full_truth)
        full_rec = tp_full / len(full_truth) if full_truth else 1.0
        full_prec = tp_full / len(found) if found else 1.0
        report["overlap"] = {"a": n_a, "b": n_b, "truth": len(truth), "found": len(found), "recall": rec,
                             "precision": prec, "exact_only_recall": rec0, "exact_only_precision": prec0,
                             "index_seconds": index_s, "result": result, "exact_truth": len(full_truth),
                             "recall_vs_exact": full_rec, "precision_vs_exact": full_prec,
                             "exact_join_seconds": exact_s}
        chk = result["check"]
        print(f"## overlap: A = {n_a:,} documents, B = {n_b:,}; planted truth {len(truth):,} B documents "
              f"({100 * len(truth) / n_b:.1f}%)\n")
        print("| method | found | recall vs planted | precision vs planted | seconds |")
        print("|---|---:|---:|---:|---:|")
        print(f"| baseline: exact hash only | {len(exact_only):,} | {rec0:.4f} | {prec0:.4f} | - |")
        print(f"| exact hash + MinHash LSH (J >= 0.9, 5-char shingles, 128 perm) | {len(found):,} | {rec:.4f} | "
              f"{prec:.4f} | index {index_s:.1f} + query {result['query_seconds']:.1f} |")
        print(f"\nagainst the exact truth (every B document vs all of A by exact Jaccard, prefix-filter join, "
              f"{exact_s:.0f} s): {len(full_truth):,} B documents overlap; LSH recall {full_rec:.4f}, precision "
              f"{full_prec:.4f}. The planted truth misses near-duplicates the source data already holds (the "
              "same RTP texts in several shared datasets), which is why precision vs planted is lower.")
        print(f"\nexact-Jaccard check on {chk.get('sample', 0)} sampled B documents (all of A compared, prefix "
              f"filter): LSH recall {chk.get('recall')} (95% CI {chk.get('recall_ci')}), exact share "
              f"{chk.get('exact_share')} vs LSH share {chk.get('lsh_share')}; {result['check_seconds']:.1f} s. "
              "Found pairs outside the planted truth are real near-duplicates of the source data "
              "(each one is confirmed by exact Jaccard >= 0.9).\n")

        # 5. Ray 1 vs 2 workers
        if args.ray_docs:
            ray_rows = []
            for workers in (1, 2):
                r = run_child({"kind": "score", "paths": paths, "limit": args.ray_docs, "scorer": "polytox-ml",
                               "options": NGRAM, "out": str(tmp / f"ray-{workers}"), "executor": "ray",
                               "workers": workers, "cpus": 1.0, "shard_size": 1000})
                ray_rows.append((workers, r))
            local = run_child({"kind": "score", "paths": paths, "limit": args.ray_docs, "scorer": "polytox-ml",
                               "options": NGRAM, "out": str(tmp / "ray-local"), "shard_size": 1000})
            report["ray"] = {"local": local, **{f"workers_{w}": r for w, r in ray_rows}}
            print(f"## Ray Data scoring, {args.ray_docs:,} documents (wall time includes Ray start-up)\n")
            print("| executor | wall s | to 1st shard s | steady docs/s | steady vs 1 worker | actor s |")
            print("|---|---:|---:|---:|---:|---:|")
            rate = local["docs"] / local["seconds"]
            print(f"| local serial (baseline) | {local['seconds']:.1f} | - | {rate:,.0f} | - | - |")

            def steady(r: dict[str, Any]) -> float:
                e = r["executor"]
                return float(e.get("steady_docs", 0)) / max(float(e.get("steady_seconds", 0)), 1e-9)

            one = steady(ray_rows[0][1])
            for w, r in ray_rows:
                e = r["executor"]
                print(f"| ray, {w} scoring actor(s) | {r['seconds']:.1f} | {e.get('first_result_seconds')} | "
                      f"{steady(r):,.0f} | {steady(r) / one:.2f}x | {e.get('actor_seconds')} |")
            print()

        # 6. extrapolation
        big = rows[-1]["score"]
        ngram_rate = big["docs"] / big["seconds"]
        print("## extrapolation to OWTC (8,013,769 documents)\n")
        print("| setting | docs/s | OWTC time | how |")
        print("|---|---:|---:|---|")
        print(f"| this machine, 1 process, n-gram scorer | {ngram_rate:,.0f} | {OWTC_DOCS / ngram_rate / 3600:.1f} h | "
              f"measured rate x 8M |")
        for cores in (32,):
            print(f"| one CPU node, {cores} cores, n-gram scorer on Ray | {ngram_rate * cores:,.0f} | "
                  f"{OWTC_DOCS / ngram_rate / cores / 60:.0f} min | extrapolated: linear in scoring actors (not "
                  "shown by the Ray rows above on this 2-core machine) |")
        if args.default_sample:
            d = report["default_scorer"]
            d_rate = d["docs"] / d["seconds"]
            print(f"| this machine, default scorer (CPU) | {d_rate:.2f} | {OWTC_DOCS / d_rate / 86400:.1f} days | "
                  f"extrapolated from the {args.default_sample}-document sample |")
            print(f"| one CPU node, 32 cores, default scorer | {d_rate * 32:.0f} | "
                  f"{OWTC_DOCS / d_rate / 32 / 3600:.1f} h | extrapolated: linear in actors |")
        gpu_rate = GPU_EFFECTIVE_FLOPS / (2 * GEMMA_PARAMS_USED * HEAD_MAX_TOKENS)
        print(f"| one GPU node (1 H100), default scorer | {gpu_rate:,.0f} | {OWTC_DOCS / gpu_rate / 60:.0f} min | "
              f"EXTRAPOLATION, not measured: 2 x {GEMMA_PARAMS_USED / 1e6:.0f}M params x {HEAD_MAX_TOKENS} tokens "
              f"per document at an assumed {GPU_EFFECTIVE_FLOPS / 1e12:.0f} TFLOP/s; the n-gram part needs "
              f"~{gpu_rate / ngram_rate:.0f} CPU cores at the measured rate to keep up |")
        report["load_avg_end"] = os.getloadavg()
        print(f"\nload average at the end: {report['load_avg_end'][0]:.1f} (shared machine)")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
