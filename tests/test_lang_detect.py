"""Language detection: a text confidently outside PTP's 17 languages is reported as such, never read as one
of them (a Swahili sentence used to be read as Indonesian and scored 0.88), and no text in the 17 is."""

from __future__ import annotations

import json
from pathlib import Path

from polytox.cli.main import main
from polytox.langs import PTP_LANGUAGES
from polytox.langs.detect import UNSUPPORTED_CONFIDENCE, detect_language, detect_ptp_language

SWAHILI = "Habari za asubuhi, rafiki yangu. Natumaini siku yako itakuwa nzuri sana leo."
DANISH = "God morgen, min ven. Jeg håber, din dag bliver rigtig god i dag."
SANITY = Path(__file__).with_name("data") / "lang_sanity.jsonl"


def test_confident_other_languages_are_reported_as_themselves() -> None:
    assert detect_language(SWAHILI) == "sw"
    assert detect_language(DANISH) == "da"
    assert detect_ptp_language(SWAHILI)[0] in PTP_LANGUAGES  # the restricted reading still exists
    assert 0.5 < UNSUPPORTED_CONFIDENCE < 1


def test_no_sentence_in_the_17_languages_is_called_unsupported() -> None:
    rows = [json.loads(line) for line in SANITY.read_text(encoding="utf-8").splitlines() if line.strip()]
    detected = {(r["lang"], r["text"]): detect_language(r["text"]) for r in rows}
    assert all(lang in PTP_LANGUAGES for lang in detected.values())
    right = sum(lang == want for (want, _), lang in detected.items()) / len(detected)
    assert right > 0.95, right  # short sentences may be read as a neighbour (es / pt), never as unsupported


def test_score_reports_an_unsupported_language_and_honours_a_named_one(tmp_path: Path, shared_data: Path) -> None:
    lexicon = ["--scorer", "lexicon", "--scorer-opt", f"dir={shared_data / 'ldnoobw'}"]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": SWAHILI}) + "\n" + json.dumps({"text": "you are an idiot"}) + "\n",
                   encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["score", *lexicon, "--input", str(src), "--out", str(out), "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["lang"] == "sw" and rows[0]["lang_detected"] is True
    assert rows[0]["toxicity"] is None and "unsupported language: sw" in rows[0]["error"]
    assert rows[1]["lang"] == "en" and rows[1]["toxicity"] is not None
    named = tmp_path / "named.jsonl"
    assert main(["score", *lexicon, "--input", str(src), "--out", str(named), "--default-lang", "id",
                 "--no-progress"]) == 0
    first = json.loads(named.read_text(encoding="utf-8").splitlines()[0])
    assert first["lang"] == "id" and first["lang_detected"] is False and first["toxicity"] is not None
