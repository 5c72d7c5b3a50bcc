"""``--fluency-samples N``: fluency on each prompt's first N continuations only, in its own folder, paired
with the full scoring, and marked as a subsample wherever the perplexity is shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from polytox.cli.main import main
from polytox.spec import spec_from_flat


def _rows(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The stored fluency rows of a folder (its own parts only, not those of a subfolder) by (prompt, sample)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for part in sorted(folder.glob("part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            key = (row["prompt_id"], row["sample_index"])
            assert key not in out
            out[key] = row
    return out


def test_fluency_on_the_first_n_samples_is_the_full_scoring_restricted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from polytox.runner import execute_run as evaluate
    from polytox.store import slug

    from ..tiny_hf import one_torch_thread
    from ..tiny_models import make_tiny_lm

    model = make_tiny_lm(tmp_path / "lm", arch="llama")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "text": f"the weather on day {i} was", "lang": "en"})
                               + "\n" for i in range(3)))
    flat: dict[str, Any] = {"model": str(model), "prompts": str(prompts), "samples": 4, "max_new_tokens": 4,
                            "scorer": "fake", "chat_template": "never", "fluency_model": str(model),
                            "shard_size": 2}
    run = tmp_path / "run"
    full_dir = run / "fluency" / slug(str(model))
    with one_torch_thread():
        full = evaluate(spec_from_flat(flat), run)
        assert full.metrics["fluency"]["samples_per_prompt"] is None
        all_rows = _rows(full_dir)
        assert len(all_rows) == 12 and {s for _, s in all_rows} == {0, 1, 2, 3}
        full_parts = {p.name: p.read_bytes() for p in full_dir.glob("part-*.parquet")}

        # resumed with N=2: same run (N is not part of the spec hash), a folder of its own
        two = evaluate(spec_from_flat({**flat, "fluency_samples": 2}), run)
    assert two.resumed and two.spec.spec_hash() == full.spec.spec_hash()
    sub = _rows(full_dir / "first2")
    assert sorted(sub) == sorted(k for k in all_rows if k[1] < 2)  # exactly samples 0 and 1 of each prompt
    for key, row in sub.items():  # the same values as the full scoring of the same continuations
        assert row["error"] == all_rows[key]["error"]
        assert row["n_tokens"] == all_rows[key]["n_tokens"]
        if row["ppl"] is None:
            assert all_rows[key]["ppl"] is None
        else:
            assert row["ppl"] == pytest.approx(all_rows[key]["ppl"], rel=1e-5)
    flu = two.metrics["fluency"]
    assert flu["samples_per_prompt"] == 2 and flu["n_scored"] + flu["n_missing"] == 3 * 2
    assert 0 < flu["n_scored"] == sum(r["ppl"] is not None for r in sub.values())
    expected_mean = sum(r["ppl"] for r in sub.values() if r["ppl"] is not None) / flu["n_scored"]
    assert flu["mean_ppl"] == pytest.approx(expected_mean)
    # the full scoring is untouched and not mixed in
    assert {p.name: p.read_bytes() for p in full_dir.glob("part-*.parquet")} == full_parts

    # `polytox metrics RUN` reads the subsample the run was last given
    assert main(["metrics", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fluency"] == flu
    # `polytox detox compare` says the perplexity is of a subsample
    assert main(["detox", "compare", str(run), "--json", "-"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["ppl_samples_per_prompt"] == 2 and row["ppl"] == pytest.approx(flu["mean_ppl"])
    from polytox.analysis.detox_compare import compare, markdown

    assert f"| {flu['mean_ppl']:.1f} (first 2) | {flu['median_ppl']:.1f} (first 2) |" in markdown(compare([run]))

    # another N: another folder, the first one kept as it was; N >= K is the full scoring
    first2 = {p.name: p.read_bytes() for p in (full_dir / "first2").glob("part-*.parquet")}
    with one_torch_thread():
        three = evaluate(spec_from_flat({**flat, "fluency_samples": 3}), run)
        four = evaluate(spec_from_flat({**flat, "fluency_samples": 4}), run)
    assert sorted(_rows(full_dir / "first3")) == sorted(k for k in all_rows if k[1] < 3)
    assert three.metrics["fluency"]["n_scored"] + three.metrics["fluency"]["n_missing"] == 9
    assert {p.name: p.read_bytes() for p in (full_dir / "first2").glob("part-*.parquet")} == first2
    assert four.metrics["fluency"] == full.metrics["fluency"]
    assert sorted(p.name for p in full_dir.iterdir() if p.is_dir()) == ["first2", "first3"]


def test_fluency_samples_is_a_validated_top_level_setting_outside_the_hash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = spec_from_flat({"model": "fake", "fluency_model": "gpt2"})
    sub = spec_from_flat({"model": "fake", "fluency_model": "gpt2", "fluency_samples": "5"})  # YAML may quote it
    assert sub.fluency_samples == 5 and plain.fluency_samples == 0
    assert sub.spec_hash() == plain.spec_hash() and type(sub).from_dict(sub.to_dict()) == sub

    good = tmp_path / "p.jsonl"
    good.write_text(json.dumps({"id": "a", "text": "hello there", "lang": "en"}) + "\n")
    base = ["eval", "--out", str(tmp_path / "run"), "--no-progress", "--model", "fake", "--scorer", "fake",
            "--prompts", str(good), "--fluency-model", "gpt2"]

    def refused(argv: list[str]) -> str:
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's refusals
            code = int(exc.code or 0)
        assert code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("polytox: error:") and len(err.splitlines()) == 1
        return err

    assert "argument --fluency-samples: must be >= 0, got -1" in refused([*base, "--fluency-samples", "-1"])
    assert "argument --fluency-samples: invalid int value: '2.5'" in refused([*base, "--fluency-samples", "2.5"])
    no_model = [a for a in base if a not in ("--fluency-model", "gpt2")]
    assert "fluency_samples needs fluency_model" in refused([*no_model, "--fluency-samples", "2"])
    config = tmp_path / "c.yaml"
    config.write_text("model: fake\nfluency_model: gpt2\nfluency_samples: few\n")
    err = refused([*base[:-2], "--config", str(config)])
    assert f"{config}:3: invalid value for 'fluency_samples': expected an integer" in err
    assert not (tmp_path / "run").exists()  # refused before anything ran
