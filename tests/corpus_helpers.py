"""Small corpora for the corpus tests, built from the real shared texts (never copied into the repo)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DOMAINS = ("https://www.bbc.co.uk/news/{i}", "http://news.example.com/a/{i}", "https://foo.blogspot.com/p{i}",
           "https://www.infowars.com/{i}", "https://edition.cnn.com/{i}", "https://theonion.com/{i}")
NGRAM = {"mode": "ngram", "cache": "off"}


def real_texts(shared: Path, n: int, offset: int = 0) -> list[dict[str, Any]]:
    """``n`` English records of the human-labelled training data (text, lang, source)."""
    out = []
    with open(shared / "scorer-train" / "en-human.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i < offset:
                continue
            if len(out) >= n:
                break
            rec = json.loads(line)
            out.append({"text": rec["text"], "lang": rec["lang"], "source": rec["source"]})
    return out


def write_corpus(path: Path, shared: Path, n: int, urls: bool = True, offset: int = 0) -> Path:
    """A JSONL corpus of ``n`` real texts with ids and (cycled, synthetic) URLs."""
    with open(path, "w", encoding="utf-8") as fh:
        for i, rec in enumerate(real_texts(shared, n, offset)):
            doc = {"id": f"d{i}", **rec}
            if urls:
                doc["url"] = DOMAINS[i % len(DOMAINS)].format(i=i)
            fh.write(json.dumps(doc) + "\n")
    return path


def planted_pair(path_a: Path, path_b: Path, shared: Path, n_a: int = 600, n_exact: int = 60,
                 n_near: int = 60, n_other: int = 120) -> dict[str, str]:
    """Corpus A (real texts of >= 300 characters) and corpus B holding exact copies of A documents,
    one-character edits of others (Jaccard ~0.97) and unrelated texts; returns B id -> planted kind."""
    texts = [r["text"] for r in real_texts(shared, 20_000) if len(r["text"]) >= 300]
    a, rest = texts[:n_a], texts[n_a:]
    with open(path_a, "w", encoding="utf-8") as fh:
        for i, t in enumerate(a):
            fh.write(json.dumps({"id": f"a{i}", "text": t, "lang": "en"}) + "\n")
    planted: dict[str, str] = {}
    with open(path_b, "w", encoding="utf-8") as fh:
        for i in range(n_exact + n_near):
            t = a[i]
            kind = "exact" if i < n_exact else "near"
            if kind == "near":
                mid = len(t) // 2
                t = t[:mid] + ("#" if t[mid] != "#" else "%") + t[mid + 1:]
            fh.write(json.dumps({"id": f"b{i}", "text": t, "lang": "en"}) + "\n")
            planted[f"b{i}"] = kind
        for j, t in enumerate(rest[:n_other]):
            fh.write(json.dumps({"id": f"o{j}", "text": t, "lang": "en"}) + "\n")
            planted[f"o{j}"] = "none"
    return planted
