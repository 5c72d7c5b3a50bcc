"""The leaderboard equals the core metrics of each run, pools runs per model, and exports faithfully."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import FAILING_MODEL, LX_LANGS, LX_MODELS, MODELS, Built, frame, per_prompt_frame
from polytox.analysis import AnalysisOptions, RunCollection, load_meta_file, load_runs
from polytox.analysis.leaderboard import BLOCK_KEYS, Leaderboard, build_leaderboard
from polytox.cli.main import main
from polytox.langs import RESOURCE_TIERS
from polytox.store import write_manifest_file

METRIC_KEYS = (
    "at",
    "at_std",
    "emt",
    "emt_std",
    "ep",
    "n_prompts",
    "n_prompts_unscored",
    "n_generations",
    "n_failed_generations",
    "n_missing_scores",
)


def _board(built: Built, paths: list[Path] | None = None, **opts: object) -> Leaderboard:
    runs = load_runs(paths or [built.root], load_meta_file(built.meta_yaml))
    return build_leaderboard(RunCollection(runs), AnalysisOptions(**opts))  # type: ignore[arg-type]


def _row(board: Leaderboard, model: str, prompt_set: str):  # type: ignore[no-untyped-def]
    (row,) = [r for r in board.rows if r.model == model and r.prompt_set == prompt_set]
    return row


def _same(block: dict, reference: dict) -> None:  # type: ignore[type-arg]
    for key in METRIC_KEYS:
        if reference[key] is None:
            assert block[key] is None, key
        else:
            assert block[key] == pytest.approx(reference[key], rel=1e-12), key


def test_each_rtp_row_equals_the_runs_own_metrics(built: Built) -> None:
    board = _board(built, [built.root / "rtp"])
    assert len(board.rows) == len(MODELS)
    for model, run in built.rtp.items():
        metrics = json.loads((run / "metrics.json").read_text())
        row = _row(board, model, "RTP")
        _same(row.overall, metrics["overall"])
        for split in ("toxic", "nontoxic"):  # RTP Table 2's split by prompt toxicity
            _same(row.by_prompt_toxicity[split], metrics["by"]["prompt_toxicity"][split])
        assert row.scorer.startswith("svm")
        assert row.meta.category == MODELS[model][2]
    # Failures are counted, not dropped: the failing model's failed generations are in the row.
    gens = pd.concat(pd.read_parquet(p) for p in (built.rtp[FAILING_MODEL] / "generations").glob("*.parquet"))
    failed = int(gens["error"].notna().sum())
    assert failed > 0
    assert _row(board, FAILING_MODEL, "RTP").overall["n_failed_generations"] == failed
    assert any(FAILING_MODEL in n and "no score" in n for n in board.notes)


def test_runs_of_a_model_are_pooled_per_language_and_tier(built: Built) -> None:
    board = _board(built, [built.root / "rtplx"])
    assert sorted(r.model for r in board.rows) == sorted(LX_MODELS)
    assert board.langs == sorted(LX_LANGS)
    for model in LX_MODELS:
        row = _row(board, model, "RTP-LX")
        assert sorted(row.runs) == sorted(f"{model}-{lang}" for lang in LX_LANGS)
        for lang in LX_LANGS:  # one run per language: the language block is that run's own metrics
            metrics = json.loads((built.rtplx[(model, lang)] / "metrics.json").read_text())
            _same(row.by_lang[lang], metrics["overall"])
        # Tiers and the overall row recomputed with pandas from the Parquet parts.
        pp = per_prompt_frame(pd.concat(frame(built.rtplx[(model, lang)], "fake") for lang in LX_LANGS))
        pp["tier"] = pp["lang"].map(RESOURCE_TIERS)
        for tier, part in pp.groupby("tier"):
            assert row.by_tier[tier]["at"] == pytest.approx(part["mean"].mean())
            assert row.by_tier[tier]["at_std"] == pytest.approx(part["mean"].std(ddof=1))
            assert row.by_tier[tier]["emt"] == pytest.approx(part["max"].mean())
            assert row.by_tier[tier]["ep"] == pytest.approx((part["max"] >= 0.5).mean())
            assert row.by_tier[tier]["n_prompts"] == len(part)
        assert row.overall["at"] == pytest.approx(pp["mean"].mean())
    assert board.tiers == ["high", "medium", "low"]


def test_ranks_filters_and_scorer_choice(built: Built) -> None:
    board = _board(built)
    for (_ps, _sc), rows in pd.DataFrame(
        [{"ps": r.prompt_set, "sc": r.scorer, "rank": r.rank, "at": r.overall["at"]} for r in board.rows]
    ).groupby(["ps", "sc"]):
        ordered = rows.sort_values("rank")
        assert list(ordered["rank"]) == list(range(1, len(rows) + 1))
        assert ordered["at"].is_monotonic_increasing
    # --scorer fake: the RTP runs are re-read with their second scorer; the LX runs keep theirs.
    fake = _board(built, scorer="fake")
    assert {r.scorer.split("_")[0] for r in fake.rows} == {"fake"}
    pp = per_prompt_frame(frame(built.rtp["pythia-70m"], "fake"))
    assert _row(fake, "pythia-70m", "RTP").overall["at"] == pytest.approx(pp["mean"].mean())
    # --scorer svm leaves the runs without svm scores out, and says so.
    svm = _board(built, scorer="svm")
    assert {r.prompt_set for r in svm.rows} == {"RTP"}
    assert any("have no scores of svm" in n and "pythia-70m-de" in n for n in svm.notes)
    # Language / model filters.
    only = _board(built, langs=("hi", "id"), models=("pythia-70m",))
    assert [(r.model, r.prompt_set) for r in only.rows] == [("pythia-70m", "RTP-LX")]
    assert only.langs == ["hi", "id"]


def test_missing_scores_of_an_incomplete_run_are_counted(built: Built, tmp_path: Path) -> None:
    run = tmp_path / "partial"
    shutil.copytree(built.rtp["pythia-70m"], run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "running"
    write_manifest_file(run / "manifest.json", manifest)  # an edit on purpose: its checksum recorded anew
    (svm_dir,) = [d for d in (run / "scores").iterdir() if d.name.startswith("svm")]
    lost = pd.read_parquet(svm_dir / "part-00001.parquet")
    (svm_dir / "part-00001.parquet").unlink()  # the shard in flight when the run was killed
    board = _board(built, [run])
    row = board.rows[0]
    before = json.loads((built.rtp["pythia-70m"] / "metrics.json").read_text())["overall"]
    assert row.overall["n_generations"] == before["n_generations"]
    assert row.overall["n_missing_scores"] == before["n_missing_scores"] + int(lost["toxicity"].notna().sum())
    assert row.overall["n_prompts_unscored"] == lost["prompt_id"].nunique()
    assert row.overall["n_prompts"] == before["n_prompts"] - lost["prompt_id"].nunique()
    assert any("not complete" in n for n in board.notes)
    # A shard never generated: its prompts are still rows, unscored, with no continuation (and no scorer
    # has scores of it: a score part without its generation part is damage, refused by every reader).
    never = pd.read_parquet(run / "generations" / "part-00001.parquet")
    (run / "generations" / "part-00001.parquet").unlink()
    for part in (run / "scores").glob("*/part-00001.parquet"):
        part.unlink()
    row = _board(built, [run]).rows[0]
    assert row.overall["n_generations"] == before["n_generations"] - len(never)
    assert row.overall["n_prompts_unscored"] == never["prompt_id"].nunique()
    assert row.overall["n_prompts"] + row.overall["n_prompts_unscored"] == before["n_prompts"]
    assert any("no continuation yet" in n for n in _board(built, [run]).notes)


def test_exports_csv_markdown_json_carry_the_same_numbers(built: Built) -> None:
    board = _board(built)
    rows = list(csv.DictReader(io.StringIO(board.to_csv())))
    assert len(rows) == len(board.rows)
    for rec, row in zip(rows, board.rows, strict=True):
        assert rec["model"] == row.model and rec["prompt_set"] == row.prompt_set
        for key in BLOCK_KEYS:
            value = row.overall[key]
            assert (rec[key] == "") if value is None else float(rec[key]) == pytest.approx(value)
        for lang, block in row.by_lang.items():
            assert float(rec[f"{lang}_at"]) == pytest.approx(block["at"])
            assert float(rec[f"{lang}_n_prompts"]) == block["n_prompts"]
        for lang in set(board.langs) - set(row.by_lang):
            assert rec[f"{lang}_at"] == ""  # missing stays missing, never 0
        assert rec["category"] == (row.meta.category or "")
    data = json.loads(json.dumps(board.to_dict()))
    assert [r["model"] for r in data["rows"]] == [r.model for r in board.rows]
    assert data["rows"][0]["overall"]["at"] == pytest.approx(board.rows[0].overall["at"])
    tables = {t.name: t for t in board.tables()}
    assert set(tables) >= {
        "leaderboard",
        "by_lang_at",
        "by_lang_emt",
        "by_lang_ep",
        "by_tier",
        "by_prompt_toxicity",
    }
    lead = tables["leaderboard"].records()
    assert [r["model"] for r in lead] == [r.model for r in board.rows]
    assert "scorer" in tables["leaderboard"].columns  # two scorers among the rows


def test_leaderboard_cli_writes_all_exports(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_csv, out_md, out_json = tmp_path / "lb.csv", tmp_path / "lb.md", tmp_path / "lb.json"
    rc = main(
        [
            "leaderboard",
            str(built.root / "rtp"),
            "--meta",
            str(built.meta_yaml),
            "--csv",
            str(out_csv),
            "--markdown",
            str(out_md),
            "--json",
            str(out_json),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    for model in MODELS:
        assert model in printed
    data = json.loads(out_json.read_text())
    board = _board(built, [built.root / "rtp"])
    assert [r["model"] for r in data["rows"]] == [r.model for r in board.rows]
    md = out_md.read_text()
    assert "| rank | model | prompt set |" in md
    assert md.count("\n| ") >= len(MODELS)
    assert len(list(csv.DictReader(out_csv.open()))) == len(MODELS)
    rc = main(["leaderboard", str(built.root / "rtp"), "--json", "-"])
    assert rc == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == len(MODELS)
    assert np.isfinite([r["overall"]["at"] for r in data["rows"]]).all()


def test_leaderboard_cli_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", str(tmp_path / "missing")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_the_detox_table_pairs_from_the_maxima_the_leaderboard_already_read(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polytox.analysis import paired
    from polytox.analysis.leaderboard import own_maxima

    runs = load_runs([built.root / "rtp"], load_meta_file(built.meta_yaml))
    collection = RunCollection(runs)
    table, sel = collection.per_prompt(None, "toxicity")
    maxima = own_maxima(table, sel, collection)
    assert sorted(maxima) == sorted(str(r.path) for r in runs)
    for run in runs:  # the same per-prompt maxima the run's own score parts give, read alone
        assert maxima[str(run.path)] == paired.prompt_max_toxicity(run.path)
    monkeypatch.setattr(paired, "prompt_max_toxicity", lambda run: pytest.fail(f"{run} read again"))
    board = build_leaderboard(collection, AnalysisOptions())
    (detox,) = [t for t in board.extra_tables if t.name == "detox"]
    assert len(detox.rows) == len(runs)


def _scanned(runs: list, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def,type-arg]
    collection = RunCollection(runs)
    monkeypatch.setattr(collection, "_kept_per_prompt", lambda sel, attribute: None)  # every part scanned
    return collection.per_prompt(None, "toxicity")[0]


def _same_table(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.column_names == b.column_names and a.num_rows == b.num_rows
    for name in a.column_names:
        x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
        if name in ("max_tox", "mean_tox", "prompt_toxicity"):
            assert all((u is None and v is None) or u == pytest.approx(v, rel=1e-12) for u, v in zip(x, y, strict=True))
        else:
            assert x == y, name


def test_kept_per_prompt_tables_equal_the_scan_and_follow_a_changed_part(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tests.core_helpers import rewrite_part

    copies = []
    for run in sorted(built.rtp.values())[:3]:
        shutil.copytree(run, tmp_path / run.name)
        shutil.rmtree(tmp_path / run.name / "derived", ignore_errors=True)
        copies.append(tmp_path / run.name)
    runs = load_runs(copies)
    kept = RunCollection(runs).per_prompt(None, "toxicity")[0]
    assert all(list((c / "derived").glob("per_prompt-*.json")) for c in copies)
    _same_table(kept, _scanned(runs, monkeypatch))
    for part in (copies[0] / "scores").glob("*/part-00000.parquet"):  # a rescoring: lower values
        table = pq.read_table(part)
        column = table.schema.get_field_index("toxicity")
        rewrite_part(part, table.set_column(column, "toxicity", pc.multiply(table.column("toxicity"), 0.5)))
    again = RunCollection(load_runs(copies)).per_prompt(None, "toxicity")[0]
    _same_table(again, _scanned(load_runs(copies), monkeypatch))
    assert again.column("max_tox").to_pylist() != kept.column("max_tox").to_pylist()
