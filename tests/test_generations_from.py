"""``polytox eval --generations-from RUN``: score another run's stored generations instead of generating.

Run A generates (fake model, fake scorer); run B takes A's generations and scores them with the lexicon
scorer. In B the generator is booby-trapped (its up-front check and its constructor raise), so B passing
proves nothing was generated or checked there; the partial case shows what is generated here and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main
from polytox.errors import PolytoxError
from polytox.generation.fake import RUDE, FakeGenerator
from polytox.scoring import build_scorer
from polytox.store import RunStore

BASE = ["--model", "fake", "--prompts", "demo", "--lang", "en", "--limit", "6", "--samples", "2",
        "--shard-size", "2", "--no-progress", "--json"]


def run_a(out: Path, *extra: str) -> None:
    assert main(["eval", "--out", str(out), *BASE, "--scorer", "fake", *extra]) == 0


def lexicon_dir(tmp_path: Path) -> str:
    """A one-language word list holding the fake model's rude words (the lexicon scorer's input)."""
    folder = tmp_path / "lexicon"
    folder.mkdir(exist_ok=True)
    (folder / "en.txt").write_text("\n".join(RUDE) + "\n")
    return str(folder)


def rescore(out: Path, source: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["eval", "--out", str(out), "--generations-from", str(source), "--scorer", "lexicon",
            "--scorer-opt", f"dir={lexicon_dir(tmp_path)}", "--no-progress", "--json", *extra]


def no_generator_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights "not on this host": checking or building the generator fails."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the generator was touched on the scoring host")

    monkeypatch.setattr(FakeGenerator, "check", classmethod(lambda cls, spec: refuse()))
    monkeypatch.setattr(FakeGenerator, "__init__", refuse)


def parts(run: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.name: pq.read_table(p).to_pylist() for p in sorted((run / "generations").glob("part-*.parquet"))}


def test_rescore_scores_the_source_generations_and_generates_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_a(a)
    no_generator_here(monkeypatch)
    args = rescore(b, a, tmp_path)
    assert main(args) == 0
    assert parts(b) == parts(a) and len(parts(a)) == 3
    sa, sb = RunStore(a), RunStore(b)
    assert sb.spec().generation == sa.spec().generation and sb.spec().prompts == sa.spec().prompts
    assert sb.spec().scorer.name == "lexicon" and set(dict(sb.spec().scorer.options)) == {"dir"}
    manifest = sb.manifest()
    assert manifest["generations_from"]["shards_copied"] == 3
    assert manifest["generations_from"]["spec_hash"] == sa.manifest()["spec_hash"]
    assert manifest["executor"]["shards_generated"] == 0 and manifest["executor"]["shards_scored"] == 3
    # B's stored values are the lexicon scorer's on A's very texts
    scorer_id = manifest["scorer"]["id"]
    rows = [r for i in range(3) for r in pq.read_table(sb.score_part(scorer_id, i)).to_pylist()]
    texts = {(g["prompt_id"], g["sample_index"]): g["text"] for part in parts(a).values() for g in part}
    lexicon = build_scorer("lexicon", {"dir": lexicon_dir(tmp_path)})
    expected = lexicon.score_batch([texts[(r["prompt_id"], r["sample_index"])] for r in rows], ["en"] * len(rows))
    assert [r["toxicity"] for r in rows] == [s.values["toxicity"] if s.values else None for s in expected]
    assert [r["error"] for r in rows] == [s.error for s in expected]
    assert len(rows) == 12 and any((r["toxicity"] or 0) > 0 for r in rows)
    # a rerun resumes: nothing copied again, nothing generated
    assert main(args) == 0
    assert RunStore(b).manifest()["generations_from"]["shards_copied"] == 3


def test_a_shard_missing_from_the_source_is_generated_here_and_counted(tmp_path: Path, capsys: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run_a(a)
    lost = parts(a)["part-00002.parquet"]
    (a / "generations" / "part-00002.parquet").unlink()
    args = rescore(b, a, tmp_path)

    def weights_missing(cls: type, spec: Any) -> None:
        raise PolytoxError("model weights are not on this host")

    with monkeypatch.context() as m:
        m.setattr(FakeGenerator, "check", classmethod(weights_missing))
        assert main(args) == 2  # something must be generated here, and the model is "not here": one line
    assert "model weights are not on this host" in capsys.readouterr().err
    assert not b.exists()  # refused before the run directory opened
    assert main(args) == 0
    manifest = RunStore(b).manifest()
    assert manifest["generations_from"]["shards_copied"] == 2 and manifest["executor"]["shards_generated"] == 1
    assert parts(b)["part-00002.parquet"] == lost  # same seeds: the shard comes out as the source had it


def test_another_spec_or_other_prompts_are_refused(tmp_path: Path, capsys: Any) -> None:
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": f"p{i}", "text": f"prompt number {i} says", "lang": "en"} for i in range(4)]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = tmp_path / "a"
    common = ["--model", "fake", "--prompts", str(prompts), "--samples", "2", "--no-progress", "--json"]
    assert main(["eval", "--out", str(a), *common, "--scorer", "fake"]) == 0

    assert main(["eval", "--out", str(tmp_path / "b"), "--generations-from", str(a), "--samples", "3"]) == 2
    err = capsys.readouterr().err
    assert "generation.samples: source 2, requested 3" in err and "only the scorer and the prompt source" in err

    assert main(["eval", "--out", str(tmp_path / "c"), "--generations-from", str(tmp_path / "nope")]) == 2
    assert "not a run directory" in capsys.readouterr().err

    moved = tmp_path / "elsewhere" / "prompts.jsonl"  # the same prompts at another path: accepted
    moved.parent.mkdir()
    moved.write_bytes(prompts.read_bytes())
    assert main([*rescore(tmp_path / "e", a, tmp_path), "--prompts", str(moved)]) == 0
    assert RunStore(tmp_path / "e").spec().prompts.source == str(moved)
    capsys.readouterr()

    rows[1]["text"] = "prompt number 1 was edited"  # same id, other text
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(rescore(tmp_path / "d", a, tmp_path)) == 2
    assert "1 prompt(s) have other text here than in that run, e.g. 'p1'" in capsys.readouterr().err
    rows[2]["id"] = "p9"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(rescore(tmp_path / "d", a, tmp_path)) == 2
    assert "1 of 4 prompt(s) here are not in that run, e.g. 'p9'" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_a_config_spec_must_match_the_source(tmp_path: Path, capsys: Any) -> None:
    a = tmp_path / "a"
    run_a(a)
    config = tmp_path / "c.yaml"
    config.write_text("model: fake\nprompts: demo\nlang: en\nlimit: 6\nsamples: 2\nshard_size: 2\nscorer: fake\n"
                      "scorer_opt: [version=2]\n")
    assert main(["eval", "--out", str(tmp_path / "b"), "--config", str(config), "--generations-from", str(a),
                 "--no-progress", "--json"]) == 0
    assert RunStore(tmp_path / "b").manifest()["executor"]["shards_generated"] == 0
    config.write_text(config.read_text().replace("limit: 6", "limit: 5"))
    assert main(["eval", "--out", str(tmp_path / "c"), "--config", str(config), "--generations-from", str(a),
                 "--no-progress"]) == 2
    assert "5 prompt(s) here, 6 in that run" in capsys.readouterr().err
    config.write_text(config.read_text().replace("limit: 5", "limit: 6").replace("samples: 2", "samples: 3"))
    assert main(["eval", "--out", str(tmp_path / "c"), "--config", str(config), "--generations-from", str(a),
                 "--no-progress"]) == 2
    assert "generation.samples: source 2, requested 3" in capsys.readouterr().err
