"""Corpus readers (JSONL, Parquet, CSV, streamed Hugging Face datasets), bad records and the language policy."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polytox.promptset.langcheck import LanguageCheck
from polytox.promptset.pipeline import StepContext, compose
from polytox.promptset.readers import CorpusSource, FieldMap, iter_source, parse_records

from .build_corpus import rtplx_records, web_documents, write_documents


def parse_all(source: CorpusSource, fields: FieldMap | None = None, steps: list | None = None):  # type: ignore[no-untyped-def]
    ctx = StepContext()
    docs = list(compose(steps or [], parse_records(iter_source(source), fields or FieldMap(), ctx), ctx))
    return docs, ctx


def test_local_formats_give_the_same_documents(shared_data: Path, tmp_path: Path) -> None:
    docs = web_documents(shared_data, ["de", "ja"], per_lang=5)
    jsonl = write_documents(tmp_path / "c.jsonl", docs)
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "c.parquet")
    with open(tmp_path / "c.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(docs[0]))
        writer.writeheader()
        writer.writerows(docs)
    results = {}
    for path in (jsonl, tmp_path / "c.parquet", tmp_path / "c.csv"):
        got, ctx = parse_all(CorpusSource(paths=(str(path),)))
        assert not ctx.rejected
        results[path.suffix] = [(d.id, d.text, d.lang, d.url, d.timestamp) for d in got]
    assert results[".jsonl"] == results[".parquet"] == results[".csv"]
    assert results[".jsonl"] == [(f"{d['lang']}:{d['id']}", d["text"], d["lang"], d["url"], d["timestamp"])
                                 for d in docs]
    limited, _ = parse_all(CorpusSource(paths=(str(jsonl),), limit=3))
    assert [d.id for d in limited] == [r[0] for r in results[".jsonl"][:3]]


def test_rtplx_records_are_documents(shared_data: Path) -> None:
    got, ctx = parse_all(CorpusSource(paths=(str(shared_data / "rtp-lx" / "RTP_LX_ZH-Hans.jsonl"),)))
    recs = rtplx_records(shared_data, "zh")
    assert len(got) == len(recs) and not ctx.rejected
    assert got[0].lang == "zh" and got[0].text == recs[0]["Prompt"] and got[0].id == f"zh:{recs[0]['Index']}"


def test_bad_records_are_rejected_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([
        json.dumps({"text": "Ein ganz normaler Satz über das Wetter in Berlin.", "lang": "de"}),
        "{not json",
        json.dumps({"text": "   ", "lang": "de"}),
        json.dumps({"text": "Something", "lang": "klingon"}),
        json.dumps({"title": "no text field here"}),
        json.dumps(["a", "list"]),
        json.dumps({"text": "Un texte français sans langue déclarée, détectée par py3langid."}),
    ]) + "\n", encoding="utf-8")
    docs, ctx = parse_all(CorpusSource(paths=(str(path),)))
    assert [d.lang for d in docs] == ["de", "fr"]
    assert docs[1].declared_lang is None and docs[1].detected_lang == "fr"
    assert docs[1].extra == {"lang_source": "detected"}
    where = {r.location.rsplit(":", 1)[1]: r.reason for r in ctx.rejected}
    assert set(where) == {"2", "3", "4", "5", "6"}
    assert where["2"].startswith("BAD_RECORD: malformed JSON")
    assert "empty or whitespace" in where["3"]
    assert "unknown language code 'klingon'" in where["4"]
    assert "missing field 'text'" in where["5"]
    assert "expected a JSON object" in where["6"]
    assert ctx.counters["read"] == {"in": 7, "out": 2, "rejected": 5, "rejected:BAD_RECORD": 5}


def test_language_policy(tmp_path: Path) -> None:
    rows = [{"id": "1", "lang": "de", "text": "Das ist ein ganz normaler deutscher Satz über das Wetter."},
            {"id": "2", "lang": "de", "text": "This sentence is clearly written in English, not in German."},
            {"id": "3", "text": "Dit is een Nederlandse zin zonder opgegeven taal, maar toch herkenbaar."}]
    path = write_documents(tmp_path / "c.jsonl", rows)
    source = CorpusSource(paths=(str(path),))
    dropped, ctx = parse_all(source, steps=[LanguageCheck("drop")])
    assert [d.id for d in dropped] == ["de:1", "nl:3"]
    assert len(ctx.rejected) == 1
    rej = ctx.rejected[0]
    assert (rej.doc_id, rej.reason, rej.text) == ("de:2", "LANG_MISMATCH: declared de, detected en", rows[1]["text"])
    assert ctx.counters["lang_check"]["mismatch:de->en"] == 1
    kept, ctx = parse_all(source, steps=[LanguageCheck("keep")])
    assert [(d.id, d.lang, d.detected_lang) for d in kept] == [("de:1", "de", "de"), ("de:2", "de", "en"),
                                                               ("nl:3", "nl", "nl")]
    assert not ctx.rejected
    off, _ = parse_all(source, steps=[LanguageCheck("off")])
    assert [d.detected_lang for d in off] == [None, None, "nl"]


def test_field_map_and_default_lang(tmp_path: Path) -> None:
    path = write_documents(tmp_path / "c.jsonl", [{"body": {"content": "Hola a todos, ¿cómo estáis hoy?"},
                                                   "src": "https://www.example.es/a", "ts": "2019-10-15"}])
    docs, _ = parse_all(CorpusSource(paths=(str(path),)),
                        FieldMap(text="body.content", url="src", timestamp="ts", default_lang="es"))
    assert (docs[0].text, docs[0].lang, docs[0].url, docs[0].timestamp) == (
        "Hola a todos, ¿cómo estáis hoy?", "es", "https://www.example.es/a", "2019-10-15")


def test_hugging_face_streaming_mc4_and_pile_like(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    mc4 = write_documents(tmp_path / "mc4.jsonl", [
        {"text": "Ein Dokument aus dem Netz über Fußball und das Wetter.", "timestamp": "2019-10-15T04:30:21Z",
         "url": "https://www.example.de/a"},
        {"text": "Noch ein Dokument, diesmal über Politik in Europa.", "timestamp": "2020-01-02T00:00:00Z",
         "url": "https://news.example.de/b"}])
    pile = write_documents(tmp_path / "pile.jsonl", [
        {"text": "A document from the Pile about compilers and garbage collection.",
         "meta": {"pile_set_name": "Pile-CC"}}])
    docs, ctx = parse_all(CorpusSource(hf_dataset="json", hf_data_files=(str(mc4),)), FieldMap(default_lang="de"))
    assert not ctx.rejected
    assert [(d.lang, d.url) for d in docs] == [("de", "https://www.example.de/a"), ("de", "https://news.example.de/b")]
    # datasets parses the strings into datetimes; they come back as ISO 8601 text.
    assert [d.timestamp[:19] for d in docs if d.timestamp] == ["2019-10-15T04:30:21", "2020-01-02T00:00:00"]
    assert docs[0].location == "hf://json//train:row 1"
    docs, _ = parse_all(CorpusSource(hf_dataset="json", hf_data_files=(str(pile),)))
    assert (docs[0].lang, docs[0].pile_set_name) == ("en", "Pile-CC")


def test_unknown_hf_dataset_is_a_clear_error() -> None:
    pytest.importorskip("datasets")
    from polytox.errors import PolytoxError

    with pytest.raises(PolytoxError, match="cannot stream Hugging Face dataset"):
        list(iter_source(CorpusSource(hf_dataset="no-such-owner/no-such-dataset-xyz")))
