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
