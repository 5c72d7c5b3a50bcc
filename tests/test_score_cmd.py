"""``polytox score``: formats in and out, one row per input row in order, bad input, crashes, resume."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main
from polytox.scoring.fake import FakeScorer

from .perspective_server import FakePerspective, model_score


def fake_values(texts: list[str], **opts: Any) -> list[float | None]:
    return [s.get("toxicity") for s in FakeScorer(**opts).score(texts, ["en"] * len(texts))]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_to_jsonl_in_order_with_all_columns(tmp_path: Path) -> None:
    texts = ["you idiot", "a calm morning", "stupid moron loser", "tea and books"]
    records = [{"id": f"r{i}", "text": t, "lang": "en"} for i, t in enumerate(texts)]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--scorer", "fake", "--scorer-opt", "attributes=toxicity,insult",
                 "--input", str(src), "--out", str(out), "--no-progress"]) == 0
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["r0", "r1", "r2", "r3"]
    assert list(rows[0]) == ["id", "lang", "lang_detected", "scorer", "toxicity", "insult", "error"]
    assert [r["toxicity"] for r in rows] == fake_values(texts, attributes="toxicity,insult")
    assert all(r["error"] is None and r["lang"] == "en" and r["scorer"].startswith("fake@") for r in rows)


def test_csv_to_parquet_detects_missing_languages(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("text,lang\nThe weather is lovely today and we walk in the park,\n"
                   "Das Wetter ist heute schön und wir gehen im Park spazieren,\nhello,EN-us\n",
                   encoding="utf-8")
    out = tmp_path / "out.parquet"
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--no-progress"]) == 0
    table = pq.read_table(out)
    assert table.schema.field("toxicity").type == pa.float64()
    rows = table.to_pylist()
    assert [(r["id"], r["lang"], r["lang_detected"]) for r in rows] == [("0", "en", True), ("1", "de", True),
                                                                       ("2", "en", False)]
    assert all(r["toxicity"] is not None for r in rows)


def test_parquet_input_and_default_lang(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["du Idiot", "guten Morgen"], "id": ["a", "b"]}), src)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--default-lang", "de",
                 "--no-progress"]) == 0
    rows = read_jsonl(out)
    assert [(r["id"], r["lang"], r["lang_detected"]) for r in rows] == [("a", "de", False),
                                                                       ("b", "de", False)]


def test_bad_input_rows_get_errors_never_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.jsonl"
    lines = [
        json.dumps({"id": "ok", "text": "you idiot", "lang": "en"}).encode(),
        b'{"id": "utf8", "text": "caf\xe9 \xff", "lang": "en"}',
        b'{"id": "json", "text": ',
        json.dumps({"id": "notext", "lang": "en"}).encode(),
        json.dumps({"id": "empty", "text": "   ", "lang": "en"}).encode(),
        json.dumps({"id": "lang", "text": "hello", "lang": "klingon"}).encode(),
        b'{"id": "surrogate", "text": "bad \\ud800 text", "lang": "en"}',
        json.dumps({"id": "long", "text": "word " * 10_000, "lang": "en"}).encode(),
        json.dumps({"id": "num", "text": 42, "lang": "en"}).encode(),
        json.dumps(["not", "an", "object"]).encode(),
    ]
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--no-progress"]) == 0
    rows = read_jsonl(out)
    assert len(rows) == len(lines)
    errors = {r["id"]: r["error"] for r in rows}
    assert errors["ok"] is None and errors["long"] is None
    assert rows[1]["error"].startswith("INVALID_UTF8") and "bad.jsonl:2" in rows[1]["error"]
    assert rows[2]["error"].startswith("BAD_INPUT: malformed JSON") and "bad.jsonl:3" in rows[2]["error"]
    assert errors["notext"].startswith("BAD_INPUT: missing field 'text'")
    assert errors["empty"].startswith("EMPTY_TEXT")
    assert errors["lang"].startswith("UNKNOWN_LANGUAGE") and rows[5]["lang"] == "klingon"
    assert errors["surrogate"].startswith("INVALID_UTF8")
    assert errors["num"].startswith("BAD_INPUT: expected a string")
    assert rows[9]["error"].startswith("BAD_INPUT: expected an object")
    for r in rows:
        assert (r["toxicity"] is None) == (r["error"] is not None)  # failures are null, never 0
    assert "8 with an error" in capsys.readouterr().err


def test_csv_row_with_invalid_utf8_does_not_spoil_the_others(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_bytes(b"id,text\n1,good text\n2,bad \xff\xfe text\n3,another good one\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--default-lang", "en",
                 "--no-progress"]) == 0
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["1", None, "3"]
    assert rows[1]["error"].startswith("INVALID_UTF8") and "in.csv:3" in rows[1]["error"]
    assert rows[0]["toxicity"] is not None and rows[2]["toxicity"] is not None


def test_parquet_binary_text_with_invalid_utf8(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": pa.array([b"fine text", b"bad \xff"], pa.binary())}), src)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--default-lang", "en",
                 "--no-progress"]) == 0
    rows = read_jsonl(out)
    assert rows[0]["error"] is None and rows[1]["error"].startswith("INVALID_UTF8")


def test_crash_part_way_loses_only_its_batch_and_a_rerun_resumes(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    texts = [f"sentence {i}" for i in range(10)]
    texts[5] = "sentence BOOM"
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": t, "lang": "en"} for t in texts])
    out = tmp_path / "out.jsonl"
    base = ["score", "--scorer", "fake", "--input", str(src), "--out", str(out), "--no-progress"]
    assert main([*base, "--scorer-opt", "crash_on=BOOM", "--scorer-opt", "batch_size=2"]) == 0
    rows = read_jsonl(out)
    crashed = [i for i, r in enumerate(rows) if r["error"]]
    assert crashed == [4, 5]  # the batch of 2 holding BOOM
    assert all(rows[i]["error"].startswith("SCORER_CRASHED: RuntimeError") for i in crashed)
    assert "2 transient error(s) were not cached" in capsys.readouterr().err
    assert main(base) == 0  # fixed scorer: 8 cache hits, the 2 crashed rows scored now
    assert re.search(r"10 scored, 8 from the cache", capsys.readouterr().err)
    assert [r["toxicity"] for r in read_jsonl(out)] == fake_values(texts)


def test_perspective_through_score_with_a_yaml_config_resumes_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSPECTIVE_API_KEY", "k")
    texts = ["you idiot", "hello world", "王八蛋你好"]
    langs = ["en", "en", "zh"]
    src = write_jsonl(tmp_path / "in.jsonl",
                      [{"text": t, "lang": lang} for t, lang in zip(texts, langs, strict=True)])
    out = tmp_path / "out.parquet"
    with FakePerspective(key="k", qps=50) as server:
        config = tmp_path / "c.yaml"
        config.write_text(f"scorer: perspective\nscorer_opt:\n  url: {server.url}\n  qps: 40\n"
                          "  attributes: TOXICITY,INSULT\n", encoding="utf-8")
        command = ["score", "--config", str(config), "--input", str(src), "--out", str(out), "--no-progress"]
        assert main(command) == 0
        assert server.count() == 3
        assert main(command) == 0
        assert server.count() == 3  # everything came from the cache
    rows = pq.read_table(out).to_pylist()
    assert [r["toxicity"] for r in rows] == [model_score(t) for t in texts]
    assert [r["insult"] for r in rows] == [model_score(t, "INSULT") for t in texts]


def test_unknown_output_extension_and_option_fail_clearly(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "x", "lang": "en"}])
    assert main(["score", "--scorer", "fake", "--input", str(src), "--out", str(tmp_path / "o.txt")]) == 2
    assert "must end in .jsonl or .parquet" in capsys.readouterr().err
    assert main(["score", "--scorer", "fake", "--scorer-opt", "colour=red", "--input", str(src),
                 "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "has no option 'colour'" in capsys.readouterr().err


def test_lexicon_works_in_eval_with_the_same_option_syntax(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "run"
    assert main(["eval", "--model", "fake", "--prompts", "demo", "--lang", "en,de", "--samples", "2",
                 "--limit", "4", "--scorer", "lexicon", "--scorer-opt", f"dir={shared_data / 'ldnoobw'}",
                 "--out", str(out), "--json", "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    scores = pq.read_table(next((out / "scores").glob("*/part-*.parquet"))).to_pylist()
    assert len(scores) == 8
    assert {"toxicity", "profanity_count", "profanity_rate", "profanity_any"} <= set(scores[0])
    failed = [r for r in scores if r["error"] is not None]
    # Only empty generations may fail, and they stay null.
    assert all(r["error"].startswith("EMPTY_TEXT") and r["toxicity"] is None for r in failed)
    assert metrics["overall"]["n_generations"] == 8 and metrics["overall"]["n_missing_scores"] == len(failed)
