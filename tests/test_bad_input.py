"""Bad input: every case of issue 3 §8 has a defined behaviour and a clear ``file:line: reason`` message.

Default: the run stops before doing any work (no run directory is created). ``--skip-bad``: bad records
are counted and listed (stderr and the manifest) and the good ones are evaluated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from polytox.errors import BadInputError, PolytoxError
from polytox.prompts import load_prompts
from polytox.prompts.readers import read_records
from polytox.scoring.textio import read_raw
from polytox.spec import PromptSpec

from .core_helpers import eval_args, read_json, run_cli, write_jsonl, write_lines

GOOD = {"text": "The weather this morning was", "lang": "en"}


def problems_of(path: Path, fmt: str = "auto") -> list[str]:
    """The problem list load_prompts reports for ``path`` (it must raise by default)."""
    with pytest.raises(BadInputError) as info:
        load_prompts(PromptSpec(source=str(path), format=fmt))
    return info.value.problems


def only_problem(path: Path, fmt: str = "auto") -> str:
    problems = problems_of(path, fmt)
    assert len(problems) == 1, problems
    return problems[0]


# ---- malformed lines: file and line number; stop before work vs --skip-bad ----------------------------
def test_malformed_json_line_is_reported_with_file_and_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [json.dumps(GOOD).encode(), b"", b'{"text": "unterminated',
                                             json.dumps({**GOOD, "text": "Another one"}).encode()])
    # line 2 is blank (skipped, not an error); line 3 is the broken one
    assert only_problem(path).startswith(f"{path}:3: malformed JSON")


def test_non_object_json_line_is_rejected(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [json.dumps(GOOD).encode(), b"[1, 2, 3]", b'"just a string"'])
    problems = problems_of(path)
    assert problems == [f"{path}:2: expected a JSON object, got list",
                        f"{path}:3: expected a JSON object, got str"]


def test_cli_stops_before_any_work_on_a_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "p.jsonl", [json.dumps(GOOD).encode(), b"{oops}"])
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(capsys, *eval_args(out, path, samples=2))
    assert code == 2
    assert f"{path}:2: malformed JSON" in stderr
    assert "nothing was run" in stderr and "--skip-bad" in stderr
    assert "Traceback" not in stderr and stdout == ""
    assert not out.exists(), "a run with bad input must not create its run directory"


def test_cli_skip_bad_counts_and_lists_bad_records(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    records: list[bytes] = [
        json.dumps({"id": f"p{i}", "text": f"Prompt number {i} says", "lang": "en"}).encode()
        for i in range(5)]
    records.insert(1, b"{not json")
    records.insert(3, json.dumps({"id": "blank", "text": "   ", "lang": "en"}).encode())
    records.append(json.dumps({"id": "nul", "text": "a\x00b", "lang": "en"}).encode())
    path = write_lines(tmp_path / "p.jsonl", records)
    out = tmp_path / "run"
    code, _, stderr = run_cli(capsys, *eval_args(out, path, samples=2, skip_bad=True))
    assert code == 0, stderr
    expected = [f"{path}:2: malformed JSON", f"{path}:4: field 'text' is empty or whitespace only",
                f"{path}:8: field 'text' contains a NUL byte"]
    assert "skipped 3 bad record(s)" in stderr
    for line in expected:
        assert line in stderr
    manifest = read_json(out / "manifest.json")
    assert manifest["n_bad_records"] == 3
    assert manifest["n_records"] == 8
    listed = manifest["bad_records"]
    assert [b[: len(e)] for b, e in zip(listed, expected, strict=True)] == expected
    prompts = pq.read_table(out / "prompts.parquet").column("prompt_id").to_pylist()
    assert prompts == [f"p{i}" for i in range(5)]
    metrics = read_json(out / "metrics.json")
    assert metrics["overall"]["n_generations"] == 5 * 2


def test_values_once_taken_silently_stop_the_run_or_are_skipped(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 62: a NaN or string toxicity, a zero-width-only text and an id with a lone surrogate (which left a
    manifest.json and a UnicodeEncodeError traceback) are bad records like any other."""
    lines = [json.dumps({"id": "good", **GOOD}).encode(),
             b'{"id": "nan", "text": "Some words", "lang": "en", "toxicity": NaN}',
             json.dumps({"id": "str", "text": "Some words", "lang": "en", "toxicity": "0.5"}).encode(),
             json.dumps({"id": "zw", "text": "\u200b\u200b", "lang": "en"}).encode(),
             json.dumps({"id": "x\ud800", "text": "Other words", "lang": "en"}).encode()]
    path = write_lines(tmp_path / "p.jsonl", lines)
    expected = [f"{path}:2: field 'toxicity' must be a number in [0, 1], got NaN",
                f"{path}:3: field 'toxicity' must be a number in [0, 1], got '0.5'",
                f"{path}:4: field 'text' holds only invisible characters (U+200B)",
                f"{path}:5: field 'id' contains a lone surrogate (invalid Unicode at 1)"]
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(capsys, *eval_args(out, path, samples=2))
    assert code == 2 and stdout == "" and "Traceback" not in stderr
    assert all(line in stderr for line in expected), stderr
    assert not out.exists()
    code, _, stderr = run_cli(capsys, *eval_args(out, path, samples=2, skip_bad=True))
    assert code == 0, stderr
    assert "skipped 4 bad record(s)" in stderr
    manifest = read_json(out / "manifest.json")
    assert manifest["n_bad_records"] == 4
    assert [b[: len(e)] for b, e in zip(manifest["bad_records"], expected, strict=True)] == expected
    assert pq.read_table(out / "prompts.parquet").column("prompt_id").to_pylist() == ["good"]


def test_skip_bad_with_nothing_good_left_is_a_clear_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [b"{", b"}"])
    with pytest.raises(PolytoxError, match=r"no prompts selected .*\(2 records, 2 bad"):
        load_prompts(PromptSpec(source=str(path), skip_bad=True))


def test_many_problems_are_summarised(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [b"{"] * 60)
    with pytest.raises(BadInputError) as info:
        load_prompts(PromptSpec(source=str(path)))
    assert len(info.value.problems) == 60
    message = str(info.value)
    assert message.startswith("60 bad record(s)")
    assert f"{path}:50:" in message and f"{path}:51:" not in message
    assert "... and 10 more" in message


# ---- missing fields, per format ------------------------------------------------------------------------
@pytest.mark.parametrize(("record", "fmt", "reason"), [
    ({"prompt": {"toxicity": 0.2}}, "auto", "missing field 'prompt.text'"),
    ({"prompt": {"text": None}}, "rtp", "missing field 'prompt.text'"),
    ({"prompt": "Half a document", "meta_data": {"url": "u"}}, "auto", "missing field 'meta_data.lang'"),
    ({"meta_data": {"lang": "en"}}, "ptp", "missing field 'prompt'"),
    ({"Prompt": "Ein Satz", "Locale": "DE"}, "auto", "missing field 'Index'"),
    ({"Prompt": "Ein Satz", "Index": 3}, "auto", "missing field 'Locale'"),
    ({"Index": 3, "Locale": "DE"}, "rtplx", "missing field 'Prompt'"),
    ({"id": "x", "lang": "en"}, "generic", "missing field 'text'"),
    ({"id": "x", "lang": "en"}, "auto", "cannot tell the record's format"),
    ({"text": 42, "lang": "en"}, "auto", "field 'text' must be a string, got int"),
])
def test_missing_or_wrong_fields(tmp_path: Path, record: dict[str, Any], fmt: str, reason: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [record])
    assert only_problem(path, fmt).startswith(f"{path}:1: {reason}")


# ---- hostile text ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "reason"), [
    ("", "field 'text' is empty or whitespace only"),
    ("   ", "field 'text' is empty or whitespace only"),
    ("\t\n \u3000", "field 'text' is empty or whitespace only"),
    ("before\x00after", "field 'text' contains a NUL byte"),
    ("\x00", "field 'text' contains a NUL byte"),
    ("lone \ud800 high surrogate", "field 'text' contains a lone surrogate"),
    ("lone \udfff low surrogate", "field 'text' contains a lone surrogate"),
    # zero-width characters only (issue 62): no visible character to continue
    ("\u200b\u200b", "field 'text' holds only invisible characters (U+200B)"),
    ("\u200c \u200d\ufeff\u2060", "field 'text' holds only invisible characters (U+200C, U+200D, U+FEFF, U+2060)"),
    ("\u202e\x01\t", "field 'text' holds only invisible characters (U+202E, U+0001)"),
])
def test_hostile_prompt_text_is_rejected(tmp_path: Path, text: str, reason: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [GOOD, {"text": text, "lang": "en"}])
    assert only_problem(path).startswith(f"{path}:2: {reason}")


def test_hostile_text_in_rtp_and_ptp_records(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"filename": "a.txt", "begin": 0, "end": 9, "prompt": {"text": "ok then", "toxicity": 0.1}},
        {"filename": "b.txt", "begin": 0, "end": 9, "prompt": {"text": " \n", "toxicity": 0.1}},
        {"prompt": "x\x00y", "meta_data": {"lang": "de"}, "toxicity": 0.3},
    ])
    assert problems_of(path) == [f"{path}:2: field 'prompt.text' is empty or whitespace only",
                                 f"{path}:3: field 'prompt' contains a NUL byte"]


def test_zero_width_characters_inside_visible_text_are_fine(tmp_path: Path) -> None:
    texts = ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: a zero-width non-joiner inside
             "family \U0001f468\u200d\U0001f469 here", "\ufeffBOM first"]
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": t, "lang": "en"} for t in texts])
    assert [p.text for p in load_prompts(PromptSpec(source=str(path))).prompts] == texts


@pytest.mark.parametrize(("pid", "reason"), [
    ("a\ud800b", "field 'id' contains a lone surrogate (invalid Unicode at 1)"),
    ("\udfff", "field 'id' contains a lone surrogate (invalid Unicode at 0)"),
    ("a\x00b", "field 'id' contains a NUL byte"),
])
def test_an_id_no_run_file_can_store_is_a_bad_record(tmp_path: Path, pid: str, reason: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "ok", **GOOD}, {"id": pid, **GOOD}])
    assert only_problem(path) == f"{path}:2: {reason}"


def test_rtp_file_name_with_a_lone_surrogate_is_a_bad_record(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"filename": "x\udc80.txt", "begin": 0, "end": 5,
                                              "prompt": {"text": "Some words", "toxicity": 0.1}}])
    assert only_problem(path) == f"{path}:1: field 'id' contains a lone surrogate (invalid Unicode at 5)"


def test_valid_surrogate_pairs_and_non_bmp_text_are_fine(tmp_path: Path) -> None:
    text = "Emoji \U0001f600 and CJK \u4e2d\u6587 are fine"
    # written with ensure_ascii, i.e. as the escaped surrogate pair \\ud83d\\ude00
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": text, "lang": "en"}])
    (prompt,) = load_prompts(PromptSpec(source=str(path))).prompts
    assert prompt.text == text


def test_invalid_utf8_in_jsonl_is_reported_per_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "p.jsonl", [
        json.dumps(GOOD).encode(),
        b'{"text": "caf\xe9 latin-1", "lang": "fr"}',            # Latin-1 byte
        b'{"text": "encoded surrogate \xed\xa0\x80", "lang": "en"}',  # CESU/WTF-8 surrogate, not UTF-8
        json.dumps({"text": "Still fine after them", "lang": "en"}).encode(),
    ])
    assert problems_of(path) == [f"{path}:2: invalid UTF-8 at byte 13", f"{path}:3: invalid UTF-8 at byte 28"]
    loaded = load_prompts(PromptSpec(source=str(path), skip_bad=True))
    assert [p.text for p in loaded.prompts] == [GOOD["text"], "Still fine after them"]
    assert loaded.n_records == 4 and loaded.n_bad == 2


# ---- languages ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["xx", "english", "e", "123", "zz-ZZ"])
def test_unknown_language_codes_in_records_are_rejected(tmp_path: Path, code: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [GOOD, {"text": "Some words here", "lang": code}])
    problem = only_problem(path)
    assert problem.startswith(f"{path}:2: unknown language code {code!r}")
    assert "PTP languages: ar, cs, de, en" in problem


@pytest.mark.parametrize(("code", "normalised"), [("EN", "en"), ("en-US", "en"), ("ZH-Hans", "zh"),
                                                   ("pt_BR", "pt"), ("in", "id"), (" de ", "de")])
def test_language_codes_are_normalised(tmp_path: Path, code: str, normalised: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "Some words here", "lang": code}])
    (prompt,) = load_prompts(PromptSpec(source=str(path))).prompts
    assert prompt.lang == normalised


def test_unknown_lang_flag_is_a_clear_cli_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run_cli(capsys, *eval_args(tmp_path / "run", lang="xx"))
    assert code == 2
    assert "unknown language code 'xx'" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "run").exists()


def test_ptp_language_from_meta_data_is_validated(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "Bonjour tout", "meta_data": {"lang": "klingon"}}])
    assert only_problem(path).startswith(f"{path}:1: unknown language code 'klingon'")


# ---- toxicity values ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "reason"), [
    (1.5, "field 'toxicity' must be in [0, 1], got 1.5"),
    (-0.1, "field 'toxicity' must be in [0, 1], got -0.1"),
    ("high", "field 'toxicity' must be a number in [0, 1], got 'high'"),
    (True, "field 'toxicity' must be a number in [0, 1], got True"),
    # a JSON value is taken as written (issue 62): a string is not a score, NaN is not "unknown" (null is)
    ("0.5", "field 'toxicity' must be a number in [0, 1], got '0.5'"),
    (float("nan"), "field 'toxicity' must be a number in [0, 1], got NaN (null means unknown)"),
    (float("inf"), "field 'toxicity' must be in [0, 1], got inf"),
])
def test_bad_prompt_toxicity_is_rejected(tmp_path: Path, value: Any, reason: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "Some words here", "lang": "en", "toxicity": value}])
    assert only_problem(path) == f"{path}:1: {reason}"


@pytest.mark.parametrize(("value", "expected"), [(None, None), (0.25, 0.25), (0, 0.0), (1, 1.0)])
def test_prompt_toxicity_null_means_unknown(tmp_path: Path, value: Any, expected: float | None) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"text": "Some words here", "lang": "en", "toxicity": value}])
    (prompt,) = load_prompts(PromptSpec(source=str(path))).prompts
    assert prompt.toxicity == expected
    assert prompt.bucket == (None if expected is None else min(3, int(expected * 4)))


def test_bad_bucket_and_bad_rtplx_rating(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"prompt": "Ein Satz", "meta_data": {"lang": "de"}, "toxicity_bucket": 7},
        {"Prompt": "Ein Satz", "Locale": "DE", "Index": 1, "Annotations": {"Toxicity": 9}},
        {"Prompt": "Ein Satz", "Locale": "DE", "Index": 2, "Annotations": {"Toxicity": "sehr"}},
    ])
    assert problems_of(path) == [
        f"{path}:1: field 'toxicity_bucket' must be 0..3, got 7",
        f"{path}:2: field 'Annotations.Toxicity' must be in [1, 5], got 9.0",
        f"{path}:3: field 'Annotations.Toxicity' must be a number, got 'sehr'",
    ]


def test_duplicate_ids(tmp_path: Path) -> None:
    """Same id + same prompt: an exact duplicate, skipped with a note. Same id + other text: bad."""
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "text": "one", "lang": "en"},
                                             {"id": "a", "text": "two", "lang": "en"},
                                             {"id": "b", "text": "three", "lang": "en"},
                                             {"id": "b", "text": "three", "lang": "en"}])
    assert only_problem(path) == f"{path}:2: duplicate id 'a' with another text or score than at {path}:1"
    loaded = load_prompts(PromptSpec(source=str(path), skip_bad=True))
    assert [p.id for p in loaded.prompts] == ["a", "b"]
    assert loaded.notes == [
        f"1 exact duplicate record(s) of the same prompt skipped ({path}:4 repeats {path}:3)"]


# ---- CSV ----------------------------------------------------------------------------------------------
def test_csv_reader_locations_quoting_and_empty_cells(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('id,text,lang,toxicity\n'
                    'a,"A prompt, with a comma",en,0.4\n'
                    'b,"A prompt spanning\ntwo lines",en,\n'
                    'c,,en,0.1\n'
                    'd,Too many,en,0.1,extra\n'
                    'e,Fine again,de,0.9\n', encoding="utf-8")
    problems = problems_of(path)
    # line numbers count physical lines: record b spans lines 3-4, so c is on line 5
    assert problems == [f"{path}:5: missing field 'text'",
                        f"{path}:6: malformed CSV: more fields than the header"]
    prompts = load_prompts(PromptSpec(source=str(path), skip_bad=True)).prompts
    assert [(p.id, p.text, p.lang, p.toxicity) for p in prompts] == [
        ("a", "A prompt, with a comma", "en", 0.4), ("b", "A prompt spanning\ntwo lines", "en", None),
        ("e", "Fine again", "de", 0.9)]


def test_csv_with_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    """csv.DictReader keeps the last of two ``text`` columns silently; which one is meant cannot be known."""
    path = tmp_path / "p.csv"
    path.write_text("id,text,lang,text\na,First text,en,Second text\n", encoding="utf-8")
    assert only_problem(path) == f"{path}:1: malformed CSV: column 'text' appears twice in the header; the file " \
                                 "cannot be read"


def test_csv_numeric_cells_are_numbers_and_nan_is_bad(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("id,text,lang,toxicity\na,One prompt,en,0.25\nb,Two prompt,en,nan\nc,Three,en,high\n"
                    "d,\u200b,en,\n", encoding="utf-8")
    assert problems_of(path) == [
        f"{path}:3: field 'toxicity' must be a number in [0, 1], got NaN (null means unknown)",
        f"{path}:4: field 'toxicity' must be a number in [0, 1], got 'high'",
        f"{path}:5: field 'text' holds only invisible characters (U+200B)"]
    loaded = load_prompts(PromptSpec(source=str(path), skip_bad=True))
    assert [(p.id, p.toxicity, p.bucket) for p in loaded.prompts] == [("a", 0.25, 1)]
    assert loaded.n_bad == 3


def test_ptp_csv_bucket_cell_is_read_as_a_number(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("prompt,lang,toxicity_bucket,prompt_toxicity\nEin Satz,de,2,0.6\n", encoding="utf-8")
    (prompt,) = load_prompts(PromptSpec(source=str(path), format="ptp")).prompts
    assert (prompt.bucket, prompt.toxicity) == (2, 0.6)


def test_csv_invalid_utf8_is_reported_per_row(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_bytes(b"\xef\xbb\xbfid,text,lang\n1,Good first row,en\n"
                     b"2,Bad \xff byte,en\n3,Good third row,en\n")
    assert problems_of(path) == [f"{path}:3: invalid UTF-8 in this row"]
    prompts = load_prompts(PromptSpec(source=str(path), skip_bad=True)).prompts
    assert [p.id for p in prompts] == ["1", "3"]  # the BOM does not leak into the first column name
    # the same reader under ``polytox score`` (scoring.textio) names the code and the column
    assert [(r.location, r.error) for r in read_raw(path)] == [
        (f"{path}:2", None), (f"{path}:3", "INVALID_UTF8: invalid UTF-8 in column 'text'"), (f"{path}:4", None)]


def test_csv_invalid_utf8_in_header(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_bytes(b"id,t\xffext\n1,x\n")
    assert only_problem(path) == f"{path}:1: invalid UTF-8 in the header row; the file cannot be read"


# ---- Parquet ------------------------------------------------------------------------------------------
def test_parquet_reader_reports_rows(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": ["Fine prompt", " ", "x\x00"],
                             "lang": ["en", "en", "xx"]}), path)
    assert problems_of(path) == [f"{path}:row 2: field 'text' is empty or whitespace only",
                                 f"{path}:row 3: field 'text' contains a NUL byte"]


def test_unreadable_parquet_is_a_bad_record_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.parquet"
    path.write_bytes(b"this is not parquet")
    problem = only_problem(path)
    assert problem.startswith(f"{path}:file: cannot read Parquet")
    code, _, stderr = run_cli(capsys, *eval_args(tmp_path / "run", path))
    assert code == 2 and "cannot read Parquet" in stderr and "Traceback" not in stderr


def test_directory_of_files_reports_each_file(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    write_lines(folder / "a.jsonl", [json.dumps(GOOD).encode(), b"{"])
    (folder / "b.csv").write_text("text,lang\n,en\nHello there,en\n", encoding="utf-8")
    (folder / "notes.txt").write_text("ignored: not a prompt file")
    (folder / ".hidden.jsonl").write_text("{")
    problems = problems_of(folder)
    assert len(problems) == 2
    assert problems[0].startswith(f"{folder / 'a.jsonl'}:2: malformed JSON: Expecting property name")
    assert problems[1] == f"{folder / 'b.csv'}:2: missing field 'text'"
    # the .txt and the hidden file are not read at all; files come in name order
    assert [(r.location, r.error is None) for r in read_records(folder)] == [
        (f"{folder / 'a.jsonl'}:1", True), (f"{folder / 'a.jsonl'}:2", False),
        (f"{folder / 'b.csv'}:2", True), (f"{folder / 'b.csv'}:3", True)]


def test_missing_file_and_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(PolytoxError, match="prompt file not found"):
        load_prompts(PromptSpec(source=str(tmp_path / "nope.jsonl")))
    other = tmp_path / "prompts.xlsx"
    other.write_text("x")
    with pytest.raises(PolytoxError, match="unknown file type"):
        load_prompts(PromptSpec(source=str(other)))
