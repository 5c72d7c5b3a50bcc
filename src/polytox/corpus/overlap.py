"""``polytox corpus overlap A B``: how many documents of corpus B also appear in corpus A (RTP Appendix D).

Method, as RTP Appendix D: documents are sets of 5-character shingles (``NEAR_DUP_SHINGLE_CHARS``);
``datasketch.MinHashLSH`` with 128 permutations (``NEAR_DUP_PERMUTATIONS``, SHA-1) proposes candidates
at Jaccard 0.9 (``NEAR_DUP_JACCARD``), and each candidate is confirmed by the exact Jaccard similarity of
the two shingle sets (>= 0.9). The banding is datasketch's optimum for ``LSH_WEIGHTS``: with its default
equal weights it picks b = 5 bands of r = 25 rows, which finds a pair at Jaccard 0.9 with probability
0.31 only (0.59 at 0.93); since every candidate is checked exactly, false candidates cost only time, so
the weights favour recall: b = 10, r = 12 finds a pair at 0.9 with probability 0.96 (0.996 at 0.93) and
proposes a pair at 0.5 with probability 0.002. Before any of that, exact duplicates are
found by a 64-bit hash of the text (the first 8 bytes of its SHA-256).

Index A once, persist it, stream B (``index`` then ``query``; the index folder is reused by later runs
against other B corpora):

- ``lsh.pkl``: the LSH index (document number -> 10 band keys, each band hashed to 64 bits);
- ``exact.npy``: the sorted exact-text hashes;
- ``texts.sqlite``: A's texts by document number, read back only to confirm candidates (on disk);
- ``signatures.npy``: A's MinHash signatures, for the band-partitioned Ray join.

Memory is the LSH index and the exact-hash array, a few KB per A document (docs/corpus.md);
B is streamed and its verdicts are written as they go (``overlap.parquet``), so B may be of any size.

Error: LSH may miss pairs above the threshold (false negatives; confirmed pairs are never false
positives). A reservoir sample of B (``--check-sample``, seeded) is compared with *all* of A by exact
Jaccard, using the prefix filter (two sets with Jaccard >= t share an element among the first
``|S| - ceil(t |S|) + 1`` of each, in any fixed order), which is exact, not an approximation. The
sample gives the LSH recall and the exact overlap share with Wilson 95% intervals.

With the scores of B (``--scores-b``, a ``corpus score`` output of B), the toxic share inside and outside
the overlap is reported with bootstrap CIs (RTP §6.2 reports the provenance of the overlapping documents).
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .._util.atomic import atomic_write, atomic_write_json
from .._util.sqlite import open_once
from ..constants import NEAR_DUP_JACCARD, NEAR_DUP_PERMUTATIONS, NEAR_DUP_SHINGLE_CHARS, TOXIC_THRESHOLD
from ..errors import PolytoxError, require
from ..promptset.dedup import jaccard, shingles
from ..promptset.readers import CorpusSource, FieldMap
from .documents import CorpusDoc, iter_docs
from .minhash import band_key

CHECK_SAMPLE = 500
LSH_WEIGHTS = (0.02, 0.98)  # datasketch (false positive, false negative) weights; see the module docstring
CHUNK = 2_000  # documents hashed per MinHash.bulk call (bounded memory)
VERDICT_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("location", pa.string()),
        ("verdict", pa.string()),
        ("a_doc_id", pa.string()),
        ("jaccard", pa.float64()),
    ]
)


def exact_key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


def encoded_shingles(text: str, k: int = NEAR_DUP_SHINGLE_CHARS) -> list[bytes]:
    return [g.encode("utf-8", "surrogatepass") for g in shingles(text, k)]


def signatures(texts: list[str], num_perm: int = NEAR_DUP_PERMUTATIONS) -> list[Any]:
    """datasketch MinHashes of the texts' shingle sets (SHA-1, the default hash, as RTP)."""
    datasketch = require("datasketch", "build")
    return list(datasketch.MinHash.bulk([encoded_shingles(t) for t in texts], num_perm=num_perm))


def _chunks(docs: Iterable[CorpusDoc], size: int = CHUNK) -> Iterator[list[CorpusDoc]]:
    chunk: list[CorpusDoc] = []
    for doc in docs:
        chunk.append(doc)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _save_npy(array: np.ndarray, path: str) -> None:
    with open(path, "wb") as fh:  # a handle: np.save would append ".npy" to the temp name
        np.save(fh, array, allow_pickle=False)


def _pickle(obj: Any, path: str) -> None:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)


TEXTS_SCHEMA = "CREATE TABLE docs (key INTEGER PRIMARY KEY, doc_id TEXT, n_shingles INTEGER, text TEXT)"


@dataclass
class OverlapIndex:
    """The persisted index of corpus A (see the module docstring)."""

    path: Path
    lsh: Any
    exact: np.ndarray
    meta: dict[str, Any]
    _db: sqlite3.Connection | None = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_once(self.path / "texts.sqlite", read_only=True)
        return self._db

    def text(self, key: int) -> tuple[str, str]:
        row = self.db.execute("SELECT doc_id, text FROM docs WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise PolytoxError(f"{self.path}: document {key} is in the LSH index but not in texts.sqlite")
        return str(row[0]), str(row[1])

    def has_exact(self, key: int) -> bool:
        i = int(np.searchsorted(self.exact, np.uint64(key)))
        return i < len(self.exact) and int(self.exact[i]) == key

    @classmethod
    def load(cls, path: str | Path) -> OverlapIndex:
        path = Path(path)
        if not (path / "meta.json").exists():
            raise PolytoxError(f"{path} is not an overlap index (no meta.json); build it with --index")
        meta = json.loads((path / "meta.json").read_text())
        with open(path / "lsh.pkl", "rb") as fh:
            lsh = pickle.load(fh)
        return cls(path=path, lsh=lsh, exact=np.load(path / "exact.npy"), meta=meta)


def build_index(
    source: CorpusSource,
    fields: FieldMap,
    path: str | Path,
    threshold: float = NEAR_DUP_JACCARD,
    num_perm: int = NEAR_DUP_PERMUTATIONS,
) -> OverlapIndex:
    """Index corpus A into ``path`` (exact hashes, LSH, texts, signatures); refuses an existing index."""
    datasketch = require("datasketch", "build")
    path = Path(path)
    if (path / "meta.json").exists():
        raise PolytoxError(f"{path} already holds an index; reuse it with --index, or pick another folder")
    path.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    lsh = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm, weights=LSH_WEIGHTS, hashfunc=band_key)
    exact: set[int] = set()
    tmp_db = path / ".texts.sqlite.tmp"
    tmp_db.unlink(missing_ok=True)
    db = open_once(tmp_db, TEXTS_SCHEMA)
    sig_tmp = path / ".signatures.bin.tmp"
    sig_dtype: str | None = None
    counts = {"documents": 0, "indexed": 0, "exact_duplicates_within": 0, "not_ok": 0}
    key = 0
    with open(sig_tmp, "wb") as sig_fh:
        for chunk in _chunks(iter_docs(source, fields, detect_lang=False)):
            todo: list[CorpusDoc] = []
            for doc in chunk:
                counts["documents"] += 1
                if doc.status != "ok":
                    counts["not_ok"] += 1
                    continue
                h = exact_key(doc.text)
                if h in exact:
                    counts["exact_duplicates_within"] += 1
                    continue
                exact.add(h)
                todo.append(doc)
            for doc, mh in zip(todo, signatures([d.text for d in todo], num_perm), strict=True):
                lsh.insert(key, mh, check_duplication=False)
                db.execute("INSERT INTO docs VALUES (?, ?, ?, ?)", (key, doc.doc_id, len(shingles(doc.text)), doc.text))
                sig_dtype = str(mh.hashvalues.dtype)
                sig_fh.write(mh.hashvalues.tobytes())
                key += 1
            db.commit()
    db.close()
    tmp_db.replace(path / "texts.sqlite")
    sig_dtype = sig_dtype or "uint64"
    sigs = np.fromfile(sig_tmp, dtype=sig_dtype).reshape(-1, num_perm)
    atomic_write(path / "signatures.npy", lambda tmp: _save_npy(sigs, tmp))
    sig_tmp.unlink()
    counts["indexed"] = key
    atomic_write(path / "exact.npy", lambda tmp: _save_npy(np.array(sorted(exact), dtype=np.uint64), tmp))
    atomic_write(path / "lsh.pkl", lambda tmp: _pickle(lsh, tmp))
    meta = {
        "source": source.describe(),
        "threshold": threshold,
        "num_perm": num_perm,
        "shingle_chars": NEAR_DUP_SHINGLE_CHARS,
        "bands": lsh.b,
        "rows": lsh.r,
        "signature_dtype": sig_dtype,
        **counts,
        "seconds": round(time.perf_counter() - start, 3),
    }
    atomic_write_json(path / "meta.json", meta)
    return OverlapIndex.load(path)


@dataclass
class Verdict:
    doc: CorpusDoc
    verdict: str  # exact | near | none | not_ok
    a_doc_id: str | None = None
    similarity: float | None = None


def confirm(index: OverlapIndex, text: str, candidates: Iterable[int], threshold: float) -> tuple[str, float] | None:
    """The first candidate of A whose exact Jaccard with ``text`` is >= threshold."""
    grams: set[str] | None = None
    for key in sorted(candidates):
        if grams is None:
            grams = shingles(text)
        a_id, a_text = index.text(int(key))
        sim = jaccard(grams, shingles(a_text))
        if sim >= threshold:
            return a_id, sim
    return None


def query_chunk(index: OverlapIndex, chunk: list[CorpusDoc], executor: Any = None) -> list[Verdict]:
    """Verdicts of a chunk of B documents: exact hash first, then LSH candidates confirmed by Jaccard."""
    threshold = float(index.meta["threshold"])
    out: list[Verdict] = []
    todo: list[int] = []
    for doc in chunk:
        if doc.status != "ok":
            out.append(Verdict(doc, "not_ok"))
        elif index.has_exact(exact_key(doc.text)):
            out.append(Verdict(doc, "exact", similarity=1.0))
        else:
            todo.append(len(out))
            out.append(Verdict(doc, "none"))
    if not todo:
        return out
    mhs = signatures([out[i].doc.text for i in todo], int(index.meta["num_perm"]))
    if executor is not None and executor.kind == "ray":
        from .ray import ray_band_candidates

        b_sigs = np.stack([m.hashvalues for m in mhs])
        a_sigs = np.load(index.path / "signatures.npy", mmap_mode="r")
        pairs = ray_band_candidates(
            np.arange(len(a_sigs)),
            a_sigs,
            np.arange(len(todo)),
            b_sigs,
            int(index.meta["bands"]),
            int(index.meta["rows"]),
            executor,
        )
        cands: dict[int, list[int]] = {}
        for a_key, b_pos in pairs:
            cands.setdefault(b_pos, []).append(a_key)
        candidate_lists = [cands.get(j, []) for j in range(len(todo))]
    else:
        candidate_lists = [index.lsh.query(mh) for mh in mhs]
    for i, candidates in zip(todo, candidate_lists, strict=True):
        hit = confirm(index, out[i].doc.text, candidates, threshold)
        if hit is not None:
            out[i] = Verdict(out[i].doc, "near", hit[0], hit[1])
    return out


def wilson(k: int, n: int, z: float = 1.959964) -> list[float] | None:
    """Wilson score interval of k/n (95% by default)."""
    if n == 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]


def exact_truth(index: OverlapIndex, sample: list[str], threshold: float) -> list[bool]:
    """For each sampled text, whether any A document has exact Jaccard >= threshold (prefix filter).

    The global order of shingles is Python's ``hash`` (fixed within this process, which builds and probes
    the prefix index): any fixed order keeps the filter exact, and a pseudo-random one avoids putting the
    most frequent shingles (spaces, punctuation) first, as lexicographic order would."""
    sets = [shingles(t) for t in sample]
    prefix_index: dict[str, list[int]] = {}
    for j, s in enumerate(sets):
        for g in sorted(s, key=hash)[: len(s) - math.ceil(threshold * len(s)) + 1]:
            prefix_index.setdefault(g, []).append(j)
    found = [False] * len(sample)
    sizes = [len(s) for s in sets]
    lo, hi = min(sizes, default=0) * threshold, max(sizes, default=0) / threshold
    for (a_text,) in index.db.execute("SELECT text FROM docs WHERE n_shingles BETWEEN ? AND ?", (lo, hi)):
        a_set = shingles(a_text)
        n = len(a_set)
        hits: set[int] = set()
        for g in sorted(a_set, key=hash)[: n - math.ceil(threshold * n) + 1]:
            hits.update(prefix_index.get(g, ()))
        for j in hits:
            if found[j] or not threshold * sizes[j] <= n <= sizes[j] / threshold:
                continue
            found[j] = jaccard(sets[j], a_set) >= threshold
    return found


def query(
    index: OverlapIndex,
    source: CorpusSource,
    fields: FieldMap,
    out: str | Path,
    check_sample: int = CHECK_SAMPLE,
    seed: int = 0,
    executor: Any = None,
) -> dict[str, Any]:
    """Stream corpus B against the index; write ``overlap.parquet`` and return the summary."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = random.Random(seed)
    counts = {"documents": 0, "scored_texts": 0, "exact": 0, "near": 0, "none": 0, "not_ok": 0}
    reservoir: list[tuple[str, bool]] = []  # (text, LSH verdict says overlap)
    tmp = out / ".overlap.parquet.tmp"
    started = False
    if executor is not None and executor.kind == "ray":
        from ..executors.ray_start import start_ray

        started = start_ray(executor.ray_address, executor.score_workers * executor.cpus_per_worker + 1)
    try:
        _stream_b(index, source, fields, executor, tmp, counts, reservoir, rng, check_sample)
    finally:
        if started:
            require("ray", "ray").shutdown()
    tmp.replace(out / "overlap.parquet")
    seen_ok = counts["documents"] - counts["not_ok"]
    counts["scored_texts"] = seen_ok
    query_seconds = time.perf_counter() - start
    overlap = counts["exact"] + counts["near"]
    check = sample_check(index, reservoir) if reservoir else {}
    result = {
        "index": str(index.path),
        "a": index.meta["source"],
        "b": source.describe(),
        "method": {k: index.meta[k] for k in ("threshold", "num_perm", "shingle_chars", "bands", "rows")},
        "a_documents": index.meta["documents"],
        "a_indexed": index.meta["indexed"],
        "counts": counts,
        "overlap": overlap,
        "overlap_share": overlap / seen_ok if seen_ok else None,
        "check": check,
        "query_seconds": round(query_seconds, 3),
        "check_seconds": round(time.perf_counter() - start - query_seconds, 3),
        "executor": getattr(executor, "kind", "serial") if executor is not None else "serial",
    }
    if check.get("recall"):
        result["overlap_estimated_exact"] = overlap / check["recall"]
    return result


def _stream_b(
    index: OverlapIndex,
    source: CorpusSource,
    fields: FieldMap,
    executor: Any,
    tmp: Path,
    counts: dict[str, int],
    reservoir: list[tuple[str, bool]],
    rng: random.Random,
    check_sample: int,
) -> None:
    seen_ok = 0
    with pq.ParquetWriter(tmp, VERDICT_SCHEMA, compression="zstd") as writer:
        for chunk in _chunks(iter_docs(source, fields, detect_lang=False)):
            verdicts = query_chunk(index, chunk, executor)
            for v in verdicts:
                counts["documents"] += 1
                counts[v.verdict] += 1
                if v.verdict == "not_ok":
                    continue
                seen_ok += 1
                item = (v.doc.text, v.verdict in ("exact", "near"))
                if len(reservoir) < check_sample:
                    reservoir.append(item)
                else:
                    j = rng.randrange(seen_ok)
                    if j < check_sample:
                        reservoir[j] = item
            writer.write_table(
                pa.Table.from_pylist(
                    [
                        {
                            "doc_id": v.doc.doc_id,
                            "location": v.doc.location,
                            "verdict": v.verdict,
                            "a_doc_id": v.a_doc_id,
                            "jaccard": v.similarity,
                        }
                        for v in verdicts
                    ],
                    schema=VERDICT_SCHEMA,
                )
            )


def sample_check(index: OverlapIndex, reservoir: list[tuple[str, bool]]) -> dict[str, Any]:
    """LSH verdicts of the sample against the exact truth (see the module docstring)."""
    truth = exact_truth(index, [t for t, _ in reservoir], float(index.meta["threshold"]))
    tp = sum(1 for (_, lsh), t in zip(reservoir, truth, strict=True) if lsh and t)
    fn = sum(1 for (_, lsh), t in zip(reservoir, truth, strict=True) if not lsh and t)
    fp = sum(1 for (_, lsh), t in zip(reservoir, truth, strict=True) if lsh and not t)
    n = len(reservoir)
    return {
        "sample": n,
        "true_overlap": tp + fn,
        "lsh_overlap": tp + fp,
        "false_negatives": fn,
        "false_positives": fp,
        "recall": tp / (tp + fn) if tp + fn else None,
        "recall_ci": wilson(tp, tp + fn),
        "exact_share": (tp + fn) / n,
        "exact_share_ci": wilson(tp + fn, n),
        "lsh_share": (tp + fp) / n,
        "lsh_share_ci": wilson(tp + fp, n),
    }


def toxic_split(
    overlap_dir: str | Path, scores_b: str, threshold: float = TOXIC_THRESHOLD, n_boot: int = 1000
) -> dict[str, Any]:
    """Toxic share of B's scored documents inside and outside the overlap (joined on doc_id + location)."""
    from .stats import _lit, share_block
    from .store import ScoreStore

    store = ScoreStore(scores_b)
    if not store.part_files():
        raise PolytoxError(f"{scores_b}: no scored parts of corpus B")
    import duckdb

    con = duckdb.connect()
    rows = con.execute(
        f"SELECT (o.verdict IN ('exact', 'near')) AS inside, count(*), "
        f"count(*) FILTER (WHERE s.toxicity >= $t) FROM read_parquet({_lit(store.glob())}) s "
        f"JOIN read_parquet({_lit(str(Path(overlap_dir) / 'overlap.parquet'))}) o "
        f"ON s.location = o.location WHERE s.status = 'ok' GROUP BY 1",
        {"t": threshold},
    ).fetchall()
    found = {bool(inside): (int(n), int(k)) for inside, n, k in rows}
    n_in, k_in = found.get(True, (0, 0))
    n_out, k_out = found.get(False, (0, 0))
    return {
        "threshold": threshold,
        "inside": share_block(k_in, n_in, seed=1, n_boot=n_boot),
        "outside": share_block(k_out, n_out, seed=2, n_boot=n_boot),
    }
