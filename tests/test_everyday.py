"""The everyday sentences' one cut (``training/scorer/everyday.py``): fit part and check part."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from polytox.constants import EVERYDAY_WEIGHT
from polytox.errors import BadInputError
from polytox.training.scorer.attention_fit import fit_row_groups
from polytox.training.scorer.data import Example
from polytox.training.scorer.everyday import EVERYDAY_SOURCE, everyday_examples, in_check, load_everyday
from polytox.training.scorer.pack import heldout_mask
from polytox.training.scorer.train import TrainConfig, combiner_rows, select, task_of, task_weight, training_data


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


def test_everyday_pairs_anchor_the_harmless_end_of_the_equating(tmp_path: Path) -> None:
    import numpy as np

    from polytox.training.scorer.everyday import EVERYDAY_RATING, everyday_pairs
    from polytox.training.scorer.scale_languages import Pairs, fit_equated

    ids = [f"n{k:05d}" for k in range(400)]
    fit_ids = [i for i in ids if not in_check("UD_German-PUD", i, True)]
    lines = [
        json.dumps({"text": f"{lang} {i}", "lang": lang, "source": f"UD_{lang}-PUD", "sent_id": i, "parallel": True})
        for i in ids
        for lang in ("en", "de")
    ]
    (tmp_path / "sentences.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = load_everyday(tmp_path)
    rng = np.random.default_rng(0)
    # everyday German reads raw 0.30 where the same English sentences read 0.05
    raw = {(r.text, r.lang): float((0.30 if r.lang == "de" else 0.05) + 0.01 * rng.random()) for r in rows}
    anchors = everyday_pairs(rows, raw)
    assert sorted(str(i)[4:] for i in anchors.index) == sorted(fit_ids)  # the fit part only, no check-part id
    assert set(anchors.lang.tolist()) == {"de"} and (anchors.h_t == EVERYDAY_RATING).all() and anchors.preserving.all()
    # toxic RTP-LX-like pairs: German raw 0.3-1.0 reads as English 0.3-1.0
    t = rng.uniform(0.3, 1.0, 300)
    toxic = Pairs(
        np.arange(300).astype(object),
        np.full(300, "de", dtype=object),
        t,
        np.full(300, 4.0),
        t,
        np.full(300, 4.0),
        np.full(300, np.nan),
    )
    alone, anchored = fit_equated(toxic, 0.0), fit_equated(Pairs.concat(toxic, anchors), 0.0)
    harmless_de = np.array([0.30, 0.305])
    assert alone(harmless_de, "de").min() >= 0.29  # RTP-LX alone: everyday German stays at 0.3
    assert anchored(harmless_de, "de").max() <= 0.07  # anchored: it reads like the English sentences
    assert abs(anchored(np.array([0.9]), "de")[0] - 0.9) < 0.03  # and the toxic end holds


def test_everyday_gaps_compare_each_language_with_english_on_the_same_ids() -> None:
    import numpy as np

    from polytox.training.scorer.everyday import EverydayRow, everyday_gaps

    def row(lang: str, sent_id: str, parallel: bool, check: bool = True) -> EverydayRow:
        return EverydayRow(f"{lang}{sent_id}", lang, "UD_X", sent_id, parallel, False, check)

    rows = [row("en", "a", True), row("en", "b", True), row("de", "a", True), row("de", "c", True)]
    rows += [row("en", "x", False), row("en", "y", False), row("de", "z", False), row("de", "a", True, check=False)]
    values = np.array([0.1, 0.3, 0.6, 0.9, 0.2, 0.6, 0.7, 0.99])
    gaps = everyday_gaps(rows, values)
    # de's id "c" has no English side and the fit-part row is not read: only id "a" (0.6 against 0.1) counts
    assert gaps["de"]["n_pud"] == 1 and gaps["de"]["gap"] == 0.5 and gaps["de"]["share_gap"] == 1.0
    assert gaps["en"]["gap"] == 0.0 and gaps["de"]["other_share_gap"] == 0.5  # 1/1 at >= 0.5 against 1/2


def _pool_like() -> list[Example]:
    """Two RTP-LX rows, a Perspective row and the everyday rows of one PUD id in three languages."""
    rows = [
        Example("Du bist ein Idiot.", "de", 0.75, True, "rtp-lx", "rtp-lx:1", rating=4.0),
        Example("You are an idiot.", "en", 0.75, True, "rtp-lx", "rtp-lx:1", rating=4.0),
        Example("A web sentence.", "en", 0.1, False, "rtp", "rtp:1", domain="perspective"),
    ]
    for lang, text in (("de", "Ein Satz."), ("fr", "Une phrase."), ("en", "A sentence.")):
        rows.append(Example(text, lang, 0.0, False, EVERYDAY_SOURCE, "ud:pud:n1", kind="sentence", domain="everyday"))
    return rows


def test_everyday_examples_are_the_trainable_fit_part_at_the_harmless_end(shared_data: Path) -> None:
    folder = shared_data / "ud-sentences"
    rows = load_everyday(folder)
    examples = everyday_examples(folder)
    checked = {(r.text, r.lang) for r in rows if r.check}
    assert len(examples) == sum(r.trainable and (r.text, r.lang) not in checked for r in rows) > 9_000
    assert {(e.target, e.label, e.domain, e.source) for e in examples} == {(0.0, False, "everyday", EVERYDAY_SOURCE)}
    check_texts = {(r.text, r.lang) for r in rows if not r.trainable}
    assert not check_texts & {(e.text, e.lang) for e in examples}  # no check-part or noncommercial row trains
    assert len({e.lang for e in examples}) == 17
    # a Parallel UD id and its translations are one group (one cross-validation fold)
    pud = [e for e in examples if e.group.startswith("ud:pud:")]
    assert pud and max(sum(e.group == g for e in pud) for g in {e.group for e in pud}) >= 10


def test_the_everyday_task_enters_the_fits_only_when_weighted() -> None:
    pool = _pool_like()
    assert not any(e.domain == "everyday" for e in select(pool, TrainConfig(everyday_weight=None)))  # off when unset
    assert [task_of(e) for e in select(pool, TrainConfig())].count("everyday") == 3  # on by default
    config = TrainConfig(everyday_weight=2.0)
    chosen = select(pool, config)
    assert [task_of(e) for e in chosen].count("everyday") == 3
    assert task_weight("everyday", config) == 2.0 and task_weight("everyday") == 1.0
    assert "everyday_weight" not in TrainConfig(everyday_weight=None).to_dict()  # unset: old heads keep their digest
    assert TrainConfig().to_dict()["everyday_weight"] == EVERYDAY_WEIGHT  # the default trains on them
    assert TrainConfig(everyday_weight=1.0).to_dict()["everyday_weight"] == 1.0
    # never held out (they have their own check part), and the held-out split of the other rows is unchanged
    held = heldout_mask(chosen)
    assert not any(h for h, e in zip(held, chosen, strict=True) if e.domain == "everyday")
    assert held[:3] == heldout_mask(pool[:3])
    rows = np.arange(len(chosen))
    sel, labels, weight = combiner_rows(config, chosen, rows, other=True)
    # the non-English combiner: RTP-LX's non-English row and the non-English everyday rows, labelled harmless
    assert [chosen[i].text for i in sel] == ["Du bist ein Idiot.", "Ein Satz.", "Une phrase."]
    assert labels.tolist() == [True, False, False] and weight.tolist() == [1.0, 2.0, 2.0]
    groups = fit_row_groups(chosen, rows, None, config.everyday_weight)
    assert [([chosen[i].text for i in g], w) for g, w in groups] == [
        (["Du bist ein Idiot.", "You are an idiot."], 1.0),
        (["Ein Satz.", "Une phrase."], 2.0),
    ]


def test_the_training_data_are_named_in_the_head() -> None:
    tasks = {"persp-2020": 5, "persp-later": 2, "rtp-lx": 3, "human:cold": 2, "human:templates-de": 1}
    assert training_data(tasks) == "persp.rtplx.human"
    assert training_data({**tasks, "everyday": 9}) == "persp.rtplx.human.ud"
    assert training_data({**tasks, "everyday": 0, "rtp-lx": 0}) == "persp.human"
