"""SIGKILL-and-resume equality (issue 3 §6): a run killed with SIGKILL at random moments and resumed each
time ends with exactly the generations, scores and metrics of an uninterrupted run with the same seed,
for several shard (commit unit) and batch sizes. Nothing lost, nothing duplicated.

The CLI runs as a real subprocess with the fake backend; ``--model-opt delay=...`` makes each shard take
long enough that the kills land mid-run: while generating, between a part's temporary file and its
rename, while scoring, while the score cache commits, while metrics are written.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .core_helpers import cli_command, cli_env, eval_args, only_scores_dir, read_parts

N_PROMPTS = 40  # the demo set's English prompts
SAMPLES = 4


def count_parts(run: Path) -> int:
    """Shards fully done (score part written); 0 before the run directory exists."""
    root = run / "scores"
    if not root.exists():
        return 0
    return sum(len(list(d.glob("part-*.parquet"))) for d in root.iterdir() if d.is_dir())


def check_consistent(run: Path) -> None:
    """After a kill: every committed part is complete and readable, and no (prompt, sample) repeats."""
    for folder in [run / "generations", *((run / "scores").iterdir() if (run / "scores").exists() else [])]:
        if not folder.exists():
            continue
        keys = [(r["prompt_id"], r["sample_index"]) for r in read_parts(folder)]
        assert len(keys) == len(set(keys)), folder
        assert len(keys) % SAMPLES == 0


def start(run: Path, cache: Path, args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cli_command(*eval_args(run, **_flags(args))), env=cli_env(cache),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _flags(args: list[str]) -> dict[str, object]:
    it = iter(args)
    flags: dict[str, object] = {}
    for key in it:
        value = next(it)
        flags.setdefault(key, [])
        flags[key].append(value)  # type: ignore[union-attr]
    return flags


@pytest.mark.slow
@pytest.mark.parametrize(("shard_size", "batch_size", "kill_seed"), [(3, 2, 1), (8, 16, 2)])
def test_sigkill_at_random_moments_then_resume_equals_uninterrupted(
        tmp_path: Path, shard_size: int, batch_size: int, kill_seed: int) -> None:
    n_shards = -(-N_PROMPTS // shard_size)
    delay = round(1.6 / n_shards, 3)
    args = ["lang", "en", "samples", str(SAMPLES), "seed", "123", "shard_size", str(shard_size),
            "batch_size", str(batch_size), "model_opt", f"delay={delay}", "model_opt", "fail_rate=0.05",
            "scorer_opt", "fail_rate=0.05", "max_failed", "100%"]  # injected failures: not an exit code

    # the reference: one uninterrupted run, with its own score cache
    reference = tmp_path / "reference"
    done = start(reference, tmp_path / "cache-ref", args)
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err.decode()

    run, cache = tmp_path / "killed", tmp_path / "cache-killed"
    rng = random.Random(kill_seed)
    kills_mid_run = 0
    for attempt in range(6):
        proc = start(run, cache, args)
        before = count_parts(run)
        if attempt == 0:
            time.sleep(rng.uniform(0.05, 0.8))  # early: during start-up, manifest or prompts
        else:
            # later: once a random number of further shards is committed, plus a random fraction of a
            # shard's time, so the kill lands anywhere inside the next shard's work
            target = min(n_shards - 1, before + rng.randint(1, max(1, n_shards // 4)))
            deadline = time.monotonic() + 60
            while count_parts(run) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, delay * 1.2))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.stderr is not None
        proc.stderr.close()
        after = count_parts(run)
        if proc.returncode == -signal.SIGKILL and 0 < after < n_shards:
            kills_mid_run += 1
        check_consistent(run)
    assert kills_mid_run >= 3, kills_mid_run

    final = start(run, cache, args)
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    assert "resumed" in err.decode()
    assert list(run.rglob(".tmp-*")) == []  # what the kills left behind, the resume removed

    # exactly the uninterrupted run's outputs: every part, row for row, and metrics.json byte for byte
    for sub in ("generations", f"scores/{only_scores_dir(reference).name}"):
        ref_parts = sorted(p.name for p in (reference / sub).glob("part-*.parquet"))
        assert sorted(p.name for p in (run / sub).glob("part-*.parquet")) == ref_parts
        assert read_parts(run / sub) == read_parts(reference / sub)
    rows = read_parts(run / "generations")
    assert len(rows) == N_PROMPTS * SAMPLES
    assert any(r["error"] for r in rows)  # failures were carried through, not dropped
    assert pq.read_table(run / "prompts.parquet").equals(pq.read_table(reference / "prompts.parquet"))
    assert (run / "metrics.json").read_bytes() == (reference / "metrics.json").read_bytes()
