"""The run store: atomic writes, resume, refusal to resume a different spec, manifest contents."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from polytox import evaluate
from polytox._util.atomic import atomic_write, atomic_write_json
from polytox.errors import SpecMismatchError
from polytox.spec import EvalSpec, GenerationSpec, MetricsSpec, PromptSpec, ScorerSpec
from polytox.store import RunStore

from .core_helpers import eval_args, only_scores_dir, read_json, read_parts, run_cli, write_jsonl


def small_spec(**gen: object) -> EvalSpec:
    settings: dict[str, object] = {"model": "fake", "backend": "fake", "samples": 3, **gen}
    return EvalSpec(prompts=PromptSpec(source="demo", langs=("en",), limit=9),
                    generation=GenerationSpec(**settings),  # type: ignore[arg-type]
                    scorer=ScorerSpec(name="fake"), seed=5, shard_size=4)


# ---- atomic writes ------------------------------------------------------------------------------------
def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "data.json"
    atomic_write_json(target, {"v": 1})

    def crash(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write('{"v": 2, "half')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, crash)
    assert json.loads(target.read_text()) == {"v": 1}
    assert os.listdir(tmp_path) == ["data.json"]  # the temporary file is gone


def test_atomic_write_replaces_in_one_step(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "x.txt"
    seen: list[bool] = []

    def write(tmp: str) -> None:
        seen.append(target.exists())
        Path(tmp).write_text("new")

    atomic_write(target, write)
    assert seen == [False] and target.read_text() == "new"  # never visible half-written


def test_leftover_temp_parts_are_ignored(tmp_path: Path) -> None:
    """A SIGKILL during a part write leaves a ``.tmp-part-*`` file: it is neither a done shard nor data."""
    out = tmp_path / "run"
    result = evaluate(small_spec(), out)
    gen_dir = out / "generations"
    (gen_dir / ".tmp-part-00003.parquet-abc").write_bytes(b"torn")
    store = RunStore(out)
    assert not store.has_generations(3)
    again = evaluate(small_spec(), out)
    assert again.metrics == result.metrics


# ---- resume -------------------------------------------------------------------------------------------
def test_rerun_resumes_and_redoes_only_missing_parts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = evaluate(small_spec(), out)
    assert not first.resumed and first.shards_done_before == 0
    scores_dir = only_scores_dir(out)
    parts = sorted(p.name for p in (out / "generations").glob("part-*.parquet"))
    assert parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]  # 9 prompts / 4
    gens_before, scores_before = read_parts(out / "generations"), read_parts(scores_dir)
    assert len(gens_before) == 9 * 3
    assert [(r["prompt_id"], r["sample_index"]) for r in gens_before] == [
        (r["prompt_id"], r["sample_index"]) for r in scores_before]
    # as after a crash: the last shard's generations and the middle shard's scores never got written
    mtime_kept = (out / "generations" / "part-00000.parquet").stat().st_mtime_ns
    (out / "generations" / "part-00002.parquet").unlink()
    (scores_dir / "part-00002.parquet").unlink()
    (scores_dir / "part-00001.parquet").unlink()
    (out / "metrics.json").unlink()
    second = evaluate(small_spec(), out)
    assert second.resumed and second.shards_done_before == 1
    assert read_parts(out / "generations") == gens_before
    assert read_parts(scores_dir) == scores_before
    assert second.metrics == first.metrics
    assert (out / "generations" / "part-00000.parquet").stat().st_mtime_ns == mtime_kept  # not redone
    manifest = read_json(out / "manifest.json")
    assert manifest["status"] == "complete" and len(manifest["resumed_at"]) == 1


def test_changed_metric_settings_resume_and_recompute(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = evaluate(small_spec(), out)
    spec = dataclasses.replace(small_spec(), metrics=MetricsSpec(threshold=0.2, comparison=">"))
    second = evaluate(spec, out)
    assert second.resumed
    assert second.metrics["settings"]["threshold"] == 0.2 and second.metrics["settings"]["comparison"] == ">"
    assert second.metrics["overall"]["emt"] == first.metrics["overall"]["emt"]
    assert second.metrics["overall"]["ep"] >= first.metrics["overall"]["ep"]
    assert read_json(out / "metrics.json") == second.metrics


@pytest.mark.parametrize(("change", "diff"), [
    ({"samples": 4}, "generation.samples: stored 3, requested 4"),
    ({"temperature": 0.7}, "generation.temperature: stored 1.0, requested 0.7"),
    ({"options": (("toxicity", "0.5"),)}, "generation.options: stored (), requested (('toxicity', '0.5'),)"),
])
def test_resuming_a_different_spec_is_refused(tmp_path: Path, change: dict[str, object], diff: str) -> None:
    out = tmp_path / "run"
    evaluate(small_spec(), out)
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(SpecMismatchError) as info:
        evaluate(small_spec(**change), out)
    message = str(info.value)
    assert "refusing to resume" in message and diff in message and "another --out" in message
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing was touched


def test_spec_mismatch_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert run_cli(capsys, *eval_args(out, samples=2, limit=3, lang="en"))[0] == 0
    code, _, err = run_cli(capsys, *eval_args(out, samples=2, limit=3, lang="en", seed=1))
    assert code == 2 and "seed: stored 0, requested 1" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, *eval_args(out, samples=2, limit=3, lang="en"))
    assert code == 0 and "resumed" in err


def test_prompt_source_changing_under_a_run_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "text": f"text {i}", "lang": "en"}
                                              for i in range(3)])
    spec = dataclasses.replace(small_spec(), prompts=PromptSpec(source=str(path)))
    evaluate(spec, tmp_path / "run")
    write_jsonl(path, [{"id": f"q{i}", "text": f"text {i}", "lang": "en"} for i in range(3)])
    with pytest.raises(SpecMismatchError, match="yields different prompts"):
        evaluate(spec, tmp_path / "run")


# ---- what a run directory holds ---------------------------------------------------------------------------
def test_run_directory_contents(tmp_path: Path) -> None:
    out = tmp_path / "run"
    spec = small_spec(options=(("fail_rate", "0.2"),))
    result = evaluate(spec, out)
    manifest = read_json(out / "manifest.json")
    assert EvalSpec.from_dict(manifest["spec"]) == result.spec
    assert manifest["spec_hash"] == result.spec.spec_hash()
    assert manifest["seed"] == 5 and manifest["status"] == "complete"
    assert {"created_at", "finished_at", "versions", "git_commit", "platform", "scorer",
            "model"} <= set(manifest)
    assert {"polytox", "numpy", "pyarrow", "duckdb", "python"} <= set(manifest["versions"])
    assert {"machine", "system", "cpu", "cpu_count"} <= set(manifest["platform"])
    assert manifest["n_records"] == 104 and manifest["n_bad_records"] == 0
    gens = pq.read_table(out / "generations")
    assert {"prompt_id", "sample_index", "text", "finish_reason", "n_tokens", "prompt_truncated",
            "error"} <= set(gens.column_names)
    rows = gens.to_pylist()
    failed = [r for r in rows if r["error"] is not None]
    assert failed and all(r["text"] is None and r["finish_reason"] == "error" for r in failed)
    ok = [r for r in rows if r["error"] is None]
    assert all(r["finish_reason"] in ("stop", "length") and r["n_tokens"] == len(r["text"].split())
               for r in ok)
    scores = read_parts(only_scores_dir(out))
    by_key = {(r["prompt_id"], r["sample_index"]): r for r in scores}
    for r in failed:  # a failed generation has a score row with an error, never a value
        s = by_key[(r["prompt_id"], r["sample_index"])]
        assert s["toxicity"] is None and s["error"].startswith("GENERATION_FAILED")
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    assert [p["position"] for p in prompts] == list(range(9)) and {p["lang"] for p in prompts} == {"en"}
    assert read_json(out / "metrics.json") == result.metrics
    assert result.metrics["overall"]["n_failed_generations"] == len(failed)


def test_an_earlier_manifest_is_read_in_the_current_shape_and_still_resumes(tmp_path: Path) -> None:
    """``migrate_manifest`` is the one reader of earlier formats: a manifest without ``checksums``,
    ``scorer``, ``seed`` and ``polytox_run`` reads like a current one, and the run still resumes."""
    from polytox.store import MANIFEST_FORMAT, migrate_manifest

    out = tmp_path / "run"
    spec = small_spec()
    evaluate(spec, out)
    written = read_json(out / "manifest.json")
    assert written["polytox_run"] == MANIFEST_FORMAT and written["checksums"] == "sha256"
    dropped = ("checksums", "scorer", "seed", "polytox_run", "manifest_sha256")
    old = {k: v for k, v in written.items() if k not in dropped}
    migrated = migrate_manifest(old)
    assert migrated["checksums"] is None and migrated["scorer"] == {} and migrated["polytox_run"] == 1
    assert migrated["seed"] == 5 == old["spec"]["seed"] and migrated["spec"] == old["spec"]
    assert migrate_manifest(written) == written  # a current manifest passes unchanged
    assert "checksums" not in old  # the input is not modified
    (out / "manifest.json").write_text(json.dumps(old), encoding="utf-8")
    store = RunStore(out)
    assert store.manifest() == migrated
    assert store.checksummed()  # the manifest no longer says so, but prompts.parquet has its checksum
    assert store.check_readable()["scorer"] == {}
    assert evaluate(spec, out).metrics == read_json(out / "metrics.json")  # resumes: same spec hash
