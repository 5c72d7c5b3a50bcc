"""The everyday sentences' one cut (``training/scorer/everyday.py``): fit part and check part."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from polytox.errors import BadInputError
from polytox.training.scorer.everyday import in_check, load_everyday


def test_the_cut_keeps_a_pud_id_on_one_side_and_halves_each_language(shared_data: Path) -> None:
    rows = load_everyday(shared_data / "ud-sentences")
    assert len(rows) == 21_788
    sides: dict[str, set[bool]] = defaultdict(set)
    for r in rows:
        if r.parallel:
            sides[r.sent_id].add(r.check)
    assert sides and all(len(s) == 1 for s in sides.values())  # an id and all its translations: one side
    check_ids = sum(next(iter(s)) for s in sides.values())
    assert 0.4 < check_ids / len(sides) < 0.6
    for lang in {r.lang for r in rows}:
        own = [r for r in rows if r.lang == lang]
        assert 0.35 < sum(r.check for r in own) / len(own) < 0.65, lang
    # noncommercial treebanks (Italian ISDT, Polish PDB) and the check part never train shipped weights
    assert {r.source for r in rows if r.noncommercial} == {"UD_Italian-ISDT", "UD_Polish-PDB"}
    assert not any(r.trainable for r in rows if r.noncommercial or r.check)
    assert sum(r.trainable for r in rows) > 8_000


def test_the_cut_depends_only_on_the_key(tmp_path: Path) -> None:
    path = tmp_path / "sentences.jsonl"
    records = [
        {"text": "Ein Satz.", "lang": "de", "source": "UD_German-PUD", "sent_id": "n01001011", "parallel": True},
        {"text": "A sentence.", "lang": "en", "source": "UD_English-PUD", "sent_id": "n01001011", "parallel": True},
        {"text": "Sans identifiant.", "lang": "fr", "source": "UD_French-GSD", "sent_id": None},
    ]
    path.write_text("\n".join(json.dumps(r) for r in reversed(records)) + "\n", encoding="utf-8")
    rows = load_everyday(tmp_path)
    by_lang = {r.lang: r for r in rows}
    assert by_lang["de"].check == by_lang["en"].check == in_check("UD_German-PUD", "n01001011", True)
    assert by_lang["fr"].sent_id == "text:Sans identifiant."
    assert load_everyday(tmp_path, langs=["de"]) == [by_lang["de"]]


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    good = '{"text": "ok", "lang": "en", "source": "X", "sent_id": "1"}'
    (tmp_path / "sentences.jsonl").write_text(good + '\n{"lang": "en"}\n')
    with pytest.raises(BadInputError, match=r"sentences.jsonl:2: missing text"):
        load_everyday(tmp_path)
