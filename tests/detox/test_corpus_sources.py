"""``polytox detox corpus --source PATH:RULE``: several sources, one label rule each, balanced, prompt-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polytox.cli.main import main
from polytox.detox.corpus import NONTOXIC, TOXIC, read_corpus
from polytox.detox.sources import build_corpus, parse_source
from polytox.errors import PolytoxError


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    scored = [{"text": f"scored doc {i}", "perspective": i / 10, "lang": "en", "source": "a"} for i in range(11)]
    scored.append({"text": "Evaluated prompt here", "perspective": 0.0, "lang": "en", "source": "a"})
    scored.append({"text": "ein deutscher text", "perspective": 0.9, "lang": "de", "source": "a"})
    human = [{"text": f"human doc {i}", "toxic": i % 4 == 0, "lang": "en", "source": s, "group": f"g{i // 2}"}
             for i, s in enumerate(["x"] * 12 + ["y"] * 4)]
    human.append({"text": "no label", "lang": "en", "source": "x"})
    prompts = [{"prompt": {"text": "evaluated  prompt here"}, "continuation": {"text": " and more"}}]
    return {"scored": _jsonl(tmp_path / "scored.jsonl", scored), "human": _jsonl(tmp_path / "human.jsonl", human),
            "prompts": _jsonl(tmp_path / "prompts.jsonl", prompts)}


def test_each_source_labels_by_its_own_rule_and_sides_balance_per_dataset(files: dict[str, Path]) -> None:
    sources = [parse_source(f"{files['scored']}:score=perspective,toxic=0.7,nontoxic=0.2"),
               parse_source(f"{files['human']}:label=toxic,name=hum")]
    corpus = build_corpus(sources, [files["prompts"]], heldout_share=0.0)
    s = corpus.stats
    # scored: 0.0, 0.1, 0.2 non-toxic (the evaluated prompt removed), 0.7..1.0 toxic (4), 0.3-0.6 left out
    rule = "perspective <= 0.2 non-toxic, >= 0.7 toxic"
    assert s["sources"]["scored"] == {"path": str(files["scored"]), "rule": rule, "labelled": 8,
                                      "left_out_by_rule": 4, "overlapping_prompts_removed": 1,
                                      "duplicates_removed": 0}
    assert s["datasets"]["scored/a"] == {"nontoxic": 3, "toxic": 3, "available_nontoxic": 3, "available_toxic": 4}
    # human: x has 3 toxic of 12, y 1 of 4; each dataset gives both sides the same number
    assert s["datasets"]["hum/x"]["toxic"] == s["datasets"]["hum/x"]["nontoxic"] == 3
    assert s["datasets"]["hum/y"]["toxic"] == s["datasets"]["hum/y"]["nontoxic"] == 1
    assert s["n_toxic"] == s["n_nontoxic"] == 7 and s["n_skipped_records"] == 1
    assert "ein deutscher text" not in corpus.texts() and "Evaluated prompt here" not in corpus.texts()
    assert set(corpus.texts(TOXIC)) >= {"scored doc 10", "scored doc 7"}
    assert all(t in {f"scored doc {i}" for i in range(3)} or t.startswith("human") for t in corpus.texts(NONTOXIC))
    total = build_corpus(sources, [files["prompts"]], balance="total", heldout_share=0.0).stats
    assert total["n_toxic"] == total["n_nontoxic"] == 8  # 4 + 3 + 1 toxic available in all


def test_percentile_rule_and_grouped_heldout(files: dict[str, Path]) -> None:
    tails = build_corpus([parse_source(f"{files['scored']}:score=perspective,percentile=20")], heldout_share=0.0)
    assert sorted(tails.texts(NONTOXIC)) == ["Evaluated prompt here", "scored doc 0"]
    assert sorted(tails.texts(TOXIC)) == ["scored doc 10", "scored doc 9"]
    corpus = build_corpus([parse_source(f"{files['human']}:label=toxic")], heldout_share=0.5)
    held, train = set(corpus.texts(heldout=True)), set(corpus.texts())
    assert held and train and not held & train
    pairs = [{f"human doc {2 * g}", f"human doc {2 * g + 1}"} for g in range(8)]
    assert not any(p & held and p & train for p in pairs)  # a group never straddles the split


def test_bad_rules_are_one_clear_error(files: dict[str, Path]) -> None:
    for spec, msg in [(f"{files['scored']}:score=perspective", "toxic=X and nontoxic=Y"),
                      (f"{files['scored']}:score=perspective,toxic=0.1,nontoxic=0.5", "must be below"),
                      (f"{files['scored']}:label=toxic,score=perspective,percentile=2", "exactly one rule"),
                      (f"{files['scored']}:colour=red", "is not one of"),
                      (f"{files['scored']}:score=p,toxic=high,nontoxic=0", "not a number"),
                      ("/nonexistent.jsonl:label=toxic", "not found")]:
        with pytest.raises(PolytoxError, match=msg):
            parse_source(spec)


def test_cli_writes_the_corpus_and_reports_each_dataset(files: dict[str, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "corpus"
    assert main(["detox", "corpus", "--out", str(out), "--exclude", str(files["prompts"]),
                 "--source", f"{files['scored']}:score=perspective,toxic=0.7,nontoxic=0.2",
                 "--source", f"{files['human']}:label=toxic"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err  # the summary goes to the log console (stderr)
    assert "7 non-toxic and 7 toxic documents" in text and "human/x: 3 non-toxic / 3 toxic (of 9 / 3)" in text
    corpus = read_corpus(out)
    assert len(corpus.train) + len(corpus.heldout) == 14
    assert main(["detox", "corpus", "--out", str(out), "--source", f"{files['scored']}:score=x"]) == 2
    assert "polytox: error:" in capsys.readouterr().err


def test_the_default_corpus_reads_the_data_folder_given(files: dict[str, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without --source the default sources and excluded prompts come from --data, else $POLYTOX_DATA, else
    the project's data folder beside a checkout; with none of them, one error line says what to give."""
    from polytox.cli.detox_cmd import DATA_ENV, data_folder

    monkeypatch.chdir(tmp_path)  # no ../shared/data here
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(PolytoxError, match="--data DIR"):
        data_folder(None)
    assert main(["detox", "corpus", "--out", str(tmp_path / "c0")]) == 2
    assert "--data DIR (or POLYTOX_DATA)" in capsys.readouterr().err
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_folder(None) == tmp_path / "env" and data_folder("given") == Path("given")
    data = tmp_path / "data"
    (data / "scorer-train").mkdir(parents=True)
    (data / "rtp").mkdir()
    scored = [json.loads(line) for line in files["scored"].read_text().splitlines()]
    _jsonl(data / "scorer-train" / "en-perspective.jsonl", [{**r, "source": "p"} for r in scored])
    _jsonl(data / "scorer-train" / "en-human.jsonl", [json.loads(x) for x in files["human"].read_text().splitlines()])
    _jsonl(data / "scorer-train" / "multilingual-human.jsonl", [{"text": "mlma", "toxic": True, "lang": "en"}])
    for name in ("toxic.jsonl", "nontoxic.jsonl"):
        (data / "rtp" / name).write_text(files["prompts"].read_text())
    assert main(["detox", "corpus", "--data", str(data), "--out", str(tmp_path / "c1")]) == 0
    stats = json.loads((tmp_path / "c1" / "corpus.json").read_text())
    assert stats["n_overlapping_prompts_removed"] >= 1  # the data folder's RTP prompts were excluded
    assert any("en-perspective" in name for name in stats["datasets"])
