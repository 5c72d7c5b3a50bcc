"""Prompt sources (RTP, PTP, RTP-LX, generic JSONL/CSV/Parquet, HF ids, the demo set) and selection
(--lang, seeded stratified --per-bucket with shortfall notes, --limit); ids stable across runs."""

from __future__ import annotations

import collections
import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polytox.constants import toxicity_bucket
from polytox.errors import PolytoxError
from polytox.langs import PTP_LANGUAGES
from polytox.prompts import demo_path, load_prompts
from polytox.spec import PromptSpec
from polytox.types import Prompt

from .core_helpers import write_jsonl


def load(source: Path | str, **kw: Any) -> list[Prompt]:
    seed = kw.pop("seed", 0)
    return load_prompts(PromptSpec(source=str(source), **kw), seed).prompts


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# ---- RTP ----------------------------------------------------------------------------------------------
def test_rtp_records_from_shared_data(shared_data: Path) -> None:
    path = shared_data / "rtp" / "toxic.jsonl"
    raw = read_jsonl(path)
    prompts = load(path)
    assert len(prompts) == len(raw)
    for p, r in zip(prompts, raw, strict=True):
        assert p.id == f"rtp:{r['filename']}:{r['begin']}:{r['end']}"
        assert p.text == r["prompt"]["text"]
        assert p.toxicity == r["prompt"]["toxicity"]
        assert p.bucket == toxicity_bucket(r["prompt"]["toxicity"])
        assert p.lang == "en" and p.source == "rtp"
        assert p.meta["challenging"] is r["challenging"]
        assert p.meta["continuation"] == r["continuation"]["text"]
    assert len({p.id for p in prompts}) == len(prompts)


def test_rtp_without_filename_gets_a_content_id_and_null_scores_are_unknown(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rtp.jsonl", [
        {"prompt": {"text": "So I said to him", "toxicity": None}, "challenging": False},
        {"prompt": {"text": "So I said to him", "toxicity": 0.7}},
    ])
    first, second = load(path)
    assert first.id.startswith("rtp:") and first.toxicity is None and first.bucket is None
    # a content id repeated is a second prompt with the same text: a stable suffix, not a collision
    assert second.id == first.id + "#2"
    assert second.toxicity == 0.7 and second.bucket == 2


def test_rtp_folder_reads_both_files_and_skips_shared_records(shared_data: Path) -> None:
    """DecodingTrust's non-toxic file repeats a few records of the toxic one (challenging ones): the
    folder yields each prompt once, and the note says which lines were skipped."""
    nontoxic = read_jsonl(shared_data / "rtp" / "nontoxic.jsonl")
    toxic = read_jsonl(shared_data / "rtp" / "toxic.jsonl")
    key = lambda r: (r["filename"], r["begin"], r["end"])  # noqa: E731
    overlap = {key(r) for r in nontoxic} & {key(r) for r in toxic}
    loaded = load_prompts(PromptSpec(source=str(shared_data / "rtp")))
    prompts = loaded.prompts
    assert len(prompts) == len(nontoxic) + len(toxic) - len(overlap)
    assert len({p.id for p in prompts}) == len(prompts)
    assert [p.meta["challenging"] for p in prompts[:3]] == [False] * 3  # nontoxic.jsonl sorts first
    if overlap:
        assert loaded.notes[0].startswith(f"{len(overlap)} exact duplicate record(s) of the same prompt")
    assert loaded.n_bad == 0


# ---- PTP ----------------------------------------------------------------------------------------------
def ptp_record(prompt: str, lang: str, **extra: Any) -> dict[str, Any]:
    return {"text": prompt + " and the rest of the document", "prompt": prompt,
            "continuation": " and the rest of the document",
            "meta_data": {"data_category": "web", "lang": lang, "url": f"https://example.org/{lang}"},
            **extra}


def perspective(value: float) -> dict[str, Any]:
    toxicity = {"summaryScore": {"value": value, "type": "PROBABILITY"},
                "spanScores": [{"begin": 0, "end": 3, "score": {"value": 0.99}}]}
    return {"attributeScores": {"TOXICITY": toxicity}, "languages": ["de"]}


def test_ptp_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "ptp.jsonl", [
        # the prompt's own Perspective summary score wins over the document's toxicity (and the span score)
        ptp_record("Das ist ein Satz", "de", toxicity=0.9, toxicity_bucket=3,
                   prompt_perspective=perspective(0.3)),
        # no prompt_perspective: the document's toxicity; bucket computed when absent
        ptp_record("Ceci est une phrase", "fr", toxicity=0.55),
        # wildchat: prompt_toxicity
        {"prompt": "Hola a todos", "prompt_toxicity": 0.1, "toxicity_bucket": 0,
         "meta_data": {"lang": "ES"}},
        # no score at all: unknown, not 0
        ptp_record("Questa frase", "it"),
    ])
    de, fr, es, it = load(path)
    assert (de.lang, de.toxicity, de.bucket, de.source) == ("de", 0.3, 3, "ptp")
    assert de.meta["url"] == "https://example.org/de" and de.meta["continuation"].startswith(" and")
    assert (fr.lang, fr.toxicity, fr.bucket) == ("fr", 0.55, 2)
    assert (es.lang, es.toxicity, es.bucket) == ("es", 0.1, 0)
    assert (it.toxicity, it.bucket) == (None, None)
    assert de.id.startswith("ptp:de:") and fr.id.startswith("ptp:fr:") and es.id.startswith("ptp:es:")
    # ids derive from (url, text): rewriting the file in another order keeps them
    path2 = write_jsonl(tmp_path / "ptp2.jsonl", list(reversed(read_jsonl(path))))
    assert {p.id: p.text for p in load(path2)} == {p.id: p.text for p in (de, fr, es, it)}


# ---- RTP-LX -------------------------------------------------------------------------------------------
def test_rtplx_records_from_shared_data(shared_data: Path) -> None:
    de_path = shared_data / "rtp-lx" / "RTP_LX_DE.jsonl"
    raw = read_jsonl(de_path)
    prompts = load(de_path)
    assert len(prompts) == len(raw)
    for p, r in zip(prompts, raw, strict=True):
        assert p.id == f"rtplx:de:{r['Index']}"
        assert p.lang == "de" and p.text == r["Prompt"] and p.source == "rtplx"
        rating = r["Annotations"]["Toxicity"]
        assert p.toxicity == pytest.approx((rating - 1) / 4)
        assert p.meta["human_toxicity"] == rating
    zh = load(shared_data / "rtp-lx" / "RTP_LX_ZH-Hans.jsonl", limit=5)
    assert {p.lang for p in zh} == {"zh"}
    # the same Index is the same source prompt in every locale: ids share it
    zh_index = {p.meta["index"] for p in load(shared_data / "rtp-lx" / "RTP_LX_ZH-Hans.jsonl")}
    de_index = {p.meta["index"] for p in prompts}
    shared = sorted(zh_index & de_index)[:3]
    assert shared and all(f"rtplx:de:{i}" in {p.id for p in prompts} for i in shared)


def test_rtplx_rating_maps_three_to_one_half(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "lx.jsonl", [
        {"Prompt": "a", "Locale": "EN", "Index": 1, "Annotations": {"Toxicity": 1.0}},
        {"Prompt": "b", "Locale": "EN", "Index": "2", "Annotations": {"Toxicity": 3.0}},
        {"Prompt": "c", "Locale": "EN", "Index": 3, "Annotations": {"Toxicity": 5.0}},
        {"Prompt": "d", "Locale": "EN", "Index": 4},
    ])
    assert [(p.id, p.toxicity, p.bucket) for p in load(path)] == [
        ("rtplx:en:1", 0.0, 0), ("rtplx:en:2", 0.5, 2), ("rtplx:en:3", 1.0, 3), ("rtplx:en:4", None, None)]


# ---- generic JSONL / CSV / Parquet: the same content gives the same prompts ----------------------------
ROWS = [
    {"id": "g1", "text": "The meeting ran late and", "lang": "en", "toxicity": 0.1},
    {"id": "g2", "text": "Der Zug kam heute", "lang": "de", "toxicity": 0.6},
    {"id": "g3", "text": "You absolute idiot, you", "lang": "en", "toxicity": 0.9},
    {"id": "g4", "text": "La casa era", "lang": "es", "toxicity": None},
]


def write_generic(tmp_path: Path, kind: str, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / f"prompts.{kind}"
    if kind == "jsonl":
        write_jsonl(path, rows)
    elif kind == "csv":
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_generic_sources_agree(tmp_path: Path, kind: str) -> None:
    prompts = load(write_generic(tmp_path, kind, ROWS))
    assert [(p.id, p.text, p.lang, p.toxicity, p.bucket, p.source) for p in prompts] == [
        ("g1", ROWS[0]["text"], "en", 0.1, 0, "generic"),
        ("g2", ROWS[1]["text"], "de", 0.6, 2, "generic"),
        ("g3", ROWS[2]["text"], "en", 0.9, 3, "generic"),
        ("g4", ROWS[3]["text"], "es", None, None, "generic")]


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_generic_without_id_or_lang(tmp_path: Path, kind: str) -> None:
    rows = [{"text": "The children played in the garden all afternoon"},
            {"text": "Die Kinder spielten den ganzen Nachmittag im Garten"},
            {"text": "The children played in the garden all afternoon"}]
    prompts = load(write_generic(tmp_path, kind, rows))
    assert [p.lang for p in prompts] == ["en", "de", "en"]
    assert all(p.meta.get("lang_detected") for p in prompts)
    # content ids: the duplicate text gets a stable suffix instead of colliding
    assert prompts[0].id.startswith("txt:") and prompts[2].id == prompts[0].id + "#2"
    assert len({p.id for p in prompts}) == 3


def test_ids_are_stable_across_runs_and_positions(tmp_path: Path) -> None:
    rows = [{"text": f"Sentence number {i} is about"} for i in range(20)]
    a = load(write_jsonl(tmp_path / "a.jsonl", rows), langs=("en",))
    b = load(write_jsonl(tmp_path / "b.jsonl", rows[::-1]), langs=("en",))
    assert {p.id: p.text for p in a} == {p.id: p.text for p in b}
    assert [p.id for p in load(tmp_path / "a.jsonl")] == [p.id for p in a]  # same file, same ids


# ---- Hugging Face ids: clear error offline -----------------------------------------------------------------
def test_hf_dataset_offline_is_a_clear_error() -> None:
    with pytest.raises(PolytoxError, match="allenai/real-toxicity-prompts"):
        load("allenai/real-toxicity-prompts", limit=3)
    with pytest.raises(PolytoxError, match="needs --hf-config"):
        load("ToxicityPrompts/PolygloToxicityPrompts")


# ---- the built-in demo set ----------------------------------------------------------------------------
def test_demo_set_covers_english_and_every_ptp_language() -> None:
    prompts = load("demo")
    counts = collections.Counter(p.lang for p in prompts)
    assert counts["en"] >= 24  # "a few dozen" English prefixes
    assert set(counts) == set(PTP_LANGUAGES)
    assert all(counts[lang] >= 2 for lang in PTP_LANGUAGES)
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(p.id.startswith(f"demo:{p.lang}:") for p in prompts)
    assert all(p.text == p.text.strip() and len(p.text) < 80 for p in prompts)  # short prefixes
    assert load("builtin:demo") == prompts
    assert len(prompts) == sum(1 for line in demo_path().read_text("utf-8").splitlines() if line.strip())


def test_demo_language_detection_agrees_with_labels() -> None:
    """The demo set's labels are checked against py3langid (restricted to PTP's 17 languages)."""
    from polytox.langs.detect import detect_language

    prompts = load("demo")
    agree = sum(detect_language(p.text) == p.lang for p in prompts)
    assert agree / len(prompts) >= 0.8, agree


# ---- selection ----------------------------------------------------------------------------------------
def test_lang_filter_and_limit() -> None:
    assert {p.lang for p in load("demo", langs=("de", "ja"))} == {"de", "ja"}
    all_de = load("demo", langs=("de",))
    assert load("demo", langs=("de",), limit=2) == all_de[:2]  # --limit takes a prefix, in source order
    english = load("demo", langs=("en",))
    assert load("demo", langs=("en",), limit=1000) == english
    with pytest.raises(PolytoxError, match="no prompts selected"):
        load("demo", langs=("sw",))


def bucket_pool(tmp_path: Path) -> Path:
    """40 prompts in bucket 0, 20 in 1, 10 in 2, 3 in 3, and 5 without a score."""
    rows: list[dict[str, Any]] = []
    for bucket, n in enumerate((40, 20, 10, 3)):
        for i in range(n):
            rows.append({"id": f"b{bucket}-{i}", "text": f"prompt {bucket} {i}", "lang": "en",
                         "toxicity": bucket * 0.25 + 0.1})
    rows += [{"id": f"u-{i}", "text": f"unscored {i}", "lang": "en"} for i in range(5)]
    rows.sort(key=lambda r: r["text"][::-1])  # interleave buckets in the file
    return write_jsonl(tmp_path / "pool.jsonl", rows)


def test_stratified_sample_is_seeded_and_notes_shortfalls(tmp_path: Path) -> None:
    path = bucket_pool(tmp_path)
    spec = PromptSpec(source=str(path), per_bucket=5)
    first = load_prompts(spec, seed=1)
    again = load_prompts(spec, seed=1)
    other = load_prompts(spec, seed=2)
    assert [p.id for p in first.prompts] == [p.id for p in again.prompts]
    assert [p.id for p in first.prompts] != [p.id for p in other.prompts]
    counts = collections.Counter(p.bucket for p in first.prompts)
    assert counts == {0: 5, 1: 5, 2: 5, 3: 3}
    assert first.notes == ["5 prompt(s) without a toxicity score left out of the stratified sample",
                           "bucket 3: only 3 prompt(s) for 5 requested"]
    # the sample keeps source order
    order = {p.id: i for i, p in enumerate(load(path))}
    assert [order[p.id] for p in first.prompts] == sorted(order[p.id] for p in first.prompts)


def test_stratified_sample_then_limit(tmp_path: Path) -> None:
    path = bucket_pool(tmp_path)
    sampled = load(path, per_bucket=4, seed=3)
    assert load(path, per_bucket=4, seed=3, limit=6) == sampled[:6]


def test_stratified_sample_after_language_filter(tmp_path: Path) -> None:
    rows = [{"id": f"{lang}{i}", "text": f"{lang} text {i}", "lang": lang, "toxicity": (i % 4) * 0.25}
            for lang in ("en", "de") for i in range(16)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    picked = load(path, langs=("de",), per_bucket=2, seed=0)
    assert {p.lang for p in picked} == {"de"}
    assert collections.Counter(p.bucket for p in picked) == {0: 2, 1: 2, 2: 2, 3: 2}
