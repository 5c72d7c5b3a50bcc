"""Small corpora for the build tests, made from the real RTP-LX prompts in ../shared/data (never copied
into the project): the prompts serve as "documents" in 17 languages."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from polytox.langs import normalize_lang

# Sentence terminators used to join prompts into multi-sentence documents, and the separator after them.
TERMINATORS = {"zh": ("。", ""), "ja": ("。", ""), "hi": ("।", " "), "ar": ("؟", " ")}
# Prompts containing these are left out of documents whose sentence boundaries a test asserts.
INNER_PUNCT = re.compile(r"[.!?。！？।؟…;:\"'“”«»„‚‹›()\[\]「」『』《》]")
DOMAINS = ("news.example.com", "www.blog.example.org", "forum.example.net", "shop.example.de", "wiki.example.jp")


def rtplx_records(data: Path, lang: str) -> list[dict[str, Any]]:
    files = {normalize_lang(p.stem.split("_")[-1]): p for p in (data / "rtp-lx").glob("RTP_LX_*.jsonl")}
    with open(files[lang], encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def clean_sentences(data: Path, lang: str, n: int, min_chars: int = 20) -> list[str]:
    """``n`` RTP-LX prompts of ``lang`` with no inner punctuation, whitespace-normalised, terminated."""
    term, _ = TERMINATORS.get(lang, (".", " "))
    out = []
    for rec in rtplx_records(data, lang):
        text = " ".join(str(rec["Prompt"]).split())
        if INNER_PUNCT.search(text) or len(text) < min_chars:
            continue
        if lang not in ("zh", "ja", "ar", "hi", "ko", "ru") and not text[0].isupper():
            continue
        if lang not in ("zh", "ja") and len(text.split()[-1]) < 4:  # "around a." reads as an abbreviation
            continue
        out.append(text + term)
        if len(out) == n:
            break
    return out


def join_sentences(sentences: list[str], lang: str) -> str:
    return TERMINATORS.get(lang, (".", " "))[1].join(sentences)


def write_documents(path: Path, docs: list[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for doc in docs:
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return path


def web_documents(data: Path, langs: list[str], per_lang: int, sentences_per_doc: int = 4) -> list[dict[str, Any]]:
    """mC4-like documents (text, url, timestamp, lang) of several RTP-LX prompts each."""
    docs: list[dict[str, Any]] = []
    for lang in langs:
        sents = clean_sentences(data, lang, per_lang * sentences_per_doc, min_chars=30)
        for i in range(0, len(sents) - sentences_per_doc + 1, sentences_per_doc):
            k = len(docs)
            docs.append({"id": f"doc{k}", "lang": lang, "text": join_sentences(sents[i : i + sentences_per_doc], lang),
                         "url": f"https://{DOMAINS[k % len(DOMAINS)]}/{lang}/{k}",
                         "timestamp": f"{2015 + k % 6}-0{1 + k % 9}-15T04:30:21Z"})
    return docs


def slow_fake_scorer(delay: str = "0.05", **kw: Any) -> Any:
    """A fake scorer that sleeps per batch, so a test can kill a build mid-way (registered in subprocesses)."""
    import time

    from polytox.scoring.fake import FakeScorer

    class SlowFakeScorer(FakeScorer):
        name = "fake"  # same id as the fake scorer: a resumed build in-process continues it

        def score_batch(self, texts: Any, langs: Any) -> Any:
            time.sleep(float(delay))
            return super().score_batch(texts, langs)

    return SlowFakeScorer(**kw)
