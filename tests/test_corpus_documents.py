"""Corpus documents: defined behaviour for every kind of bad input, and PSL domain normalisation."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox.corpus.documents import iter_docs
from polytox.corpus.domains import domain_of, normalize_key
from polytox.corpus.score import ScoreJob, run_score
from polytox.promptset.readers import CorpusSource, FieldMap

pytest.importorskip("publicsuffixlist")


@pytest.mark.parametrize(("url", "domain"), [
    ("https://www.bbc.co.uk/news/x", "bbc.co.uk"), ("http://news.bbc.co.uk", "bbc.co.uk"),
    ("https://foo.blogspot.com/p", "foo.blogspot.com"), ("example.com/path", "example.com"),
    ("http://192.168.0.1/x", "192.168.0.1"), ("http://localhost:8000/", None), ("", None), (None, None),
    ("https://WWW.Example.COM.", "example.com"), ("http://[::1", None),
])
def test_domains_use_the_public_suffix_list(url: str | None, domain: str | None) -> None:
    assert domain_of(url) == domain


def test_label_keys_normalise_like_document_urls() -> None:
    assert normalize_key(" https://www.BBC.co.uk/news ") == "bbc.co.uk"
    assert normalize_key("co.uk") is None  # a bare public suffix is no domain


LONG = "This is a long English document about nothing in particular. " * 400


def bad_corpus(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"id": "ok1", "text": "A perfectly normal sentence about the weather today.", "url": "https://a.example.org/1"}),
        json.dumps({"id": "empty", "text": "   \n"}),
        json.dumps({"id": "nul", "text": "abc\u0000def"}),
        json.dumps({"id": "ctrl", "text": "\u0001\u0002\u0003\u0004x" * 10}),
        "{not json",
        json.dumps({"id": "long", "text": LONG, "url": "https://b.example.org/2", "lang": "en"}),
        json.dumps({"id": "klingon", "text": "tlhIngan Hol Dajatlh'a'", "lang": "tlh-Latn-XX-ancient"}),
        json.dumps({"id": "nourl", "text": "No URL on this one, but fine text.", "lang": "en"}),
        json.dumps({"id": "german", "text": "Das ist ein ganz normaler deutscher Satz.", "lang": "de"}),
        json.dumps(["a", "list"]),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe broken utf8\n")
    return path


def test_every_kind_of_bad_input_gets_a_status(tmp_path: Path) -> None:
    path = bad_corpus(tmp_path)
    docs = list(iter_docs(CorpusSource(paths=(str(path),)), FieldMap()))
    by_id = {d.doc_id: d for d in docs}
    assert len(docs) == 11
    assert by_id["ok1"].status == "ok" and by_id["ok1"].domain == "example.org" and by_id["ok1"].lang == "en"
    assert by_id["empty"].status == "empty"
    assert by_id["nul"].status == "binary" and "NUL" in (by_id["nul"].error or "")
    assert by_id["ctrl"].status == "binary"
    assert by_id["klingon"].status == "ok" and by_id["klingon"].lang == "und"
    assert by_id["nourl"].url is None and by_id["nourl"].domain is None and by_id["nourl"].status == "ok"
    unreadable = [d for d in docs if d.status == "unreadable"]
    assert [d.location for d in unreadable] == [f"{path}:5", f"{path}:10", f"{path}:11"]
    assert "malformed JSON" in (unreadable[0].error or "") and "UTF-8" in (unreadable[2].error or "")


def test_scoring_keeps_every_bad_record_with_its_reason(tmp_path: Path) -> None:
    path = bad_corpus(tmp_path)
    job = ScoreJob(source=CorpusSource(paths=(str(path),)), scorer="fake",
                   scorer_options={"languages": "en", "cache": "off"}, shard_size=4, max_bytes=1000)
    summary = run_score(job, str(tmp_path / "out"))
    rows = {r["doc_id"]: r for r in pq.read_table(tmp_path / "out" / "parts").to_pylist()}
    assert summary.status_counts == {"ok": 3, "unreadable": 3, "empty": 1, "binary": 2,
                                     "unsupported_language": 2, "score_failed": 0}
    assert rows["long"]["truncated"] is True and rows["long"]["toxicity"] is not None
    assert rows["long"]["length_bytes"] == len(LONG) > 1000  # the stored length is the uncut one
    assert rows["german"]["status"] == "unsupported_language" and rows["german"]["toxicity"] is None
    assert rows["klingon"]["status"] == "unsupported_language"
    assert rows["empty"]["toxicity"] is None  # never a made-up 0
    assert summary.truncated == 1


def test_text_folders_one_document_per_file(tmp_path: Path) -> None:
    folder = tmp_path / "owtc"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("First document text here.", encoding="utf-8")
    (folder / "sub" / "b.txt").write_text("Second document, in a subfolder.", encoding="utf-8")
    (folder / "c.txt").write_bytes(b"\x00\x01\x02binary")
    (folder / "d.txt").write_bytes(b"bad \xff utf8")
    (folder / "ignored.bin").write_bytes(b"x")
    docs = list(iter_docs(CorpusSource(paths=(str(folder),)), FieldMap(default_lang="en")))
    assert [(d.doc_id, d.status) for d in docs] == [
        ("a.txt", "ok"), ("c.txt", "binary"), ("loc:" + docs[2].doc_id[4:], "unreadable"), ("sub/b.txt", "ok")]
    assert docs[0].lang == "en" and docs[0].lang_source == "declared"
