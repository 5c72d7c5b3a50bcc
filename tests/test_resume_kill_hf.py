"""SIGKILL at arbitrary moments, resume, and end with exactly the uninterrupted run's output.

Uses the real transformers backend on a tiny random Llama, in a subprocess running the real CLI.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("transformers")

from .tiny_models import make_tiny_lm

ROOT = Path(__file__).resolve().parents[1]


def write_prompts(path: Path, n: int) -> Path:
    words = "the weather this morning was cold and my neighbour told me that you are an idiot".split()
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))
            fh.write(json.dumps({"id": f"p{i:03d}", "text": text, "lang": "en"}) + "\n")
    return path


def command(model: Path, prompts: Path, out: Path, batch: int, shard: int) -> list[str]:
    return [sys.executable, "-m", "polytox.cli.main", "eval", "--model", str(model), "--prompts", str(prompts),
            "--samples", "4", "--max-new-tokens", "16", "--batch-size", str(batch), "--shard-size", str(shard),
            "--scorer", "fake", "--seed", "7", "--no-progress", "--json", "--out", str(out)]


def table(run: Path, what: str) -> list[dict[str, object]]:
    files = sorted((run / what).rglob("part-*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: (str(r["prompt_id"]), int(r["sample_index"])))  # type: ignore[call-overload]


def parts(run: Path) -> int:
    return len(list((run / "generations").glob("part-*.parquet"))) if (run / "generations").exists() else 0


@pytest.mark.slow
@pytest.mark.parametrize(("batch", "shard"), [(2, 4), (5, 6)])
def test_sigkill_anywhere_then_resume_equals_uninterrupted(tmp_path: Path, batch: int, shard: int) -> None:
    model = make_tiny_lm(tmp_path / "model", arch="llama")
    prompts = write_prompts(tmp_path / "prompts.jsonl", 36)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    clean = tmp_path / "clean"
    subprocess.run(command(model, prompts, clean, batch, shard), check=True, env=env, capture_output=True)

    def interrupted_run(killed: Path, rng: random.Random) -> int:
        """Run to completion, SIGKILLing after random fresh progress; return the number of kills."""
        kills = 0
        for _attempt in range(40):
            proc = subprocess.Popen(command(model, prompts, killed, batch, shard), env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            before = parts(killed)
            deadline = time.time() + 60
            while proc.poll() is None and parts(killed) <= before and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.05))  # land anywhere: mid-batch, mid-write, mid-scoring, mid-metrics
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
            assert proc.returncode == 0
            return kills
        pytest.fail("the run never completed")

    rng = random.Random(batch * 100 + shard)
    # A fast machine can finish the last shards between two polls; retry with a fresh directory until
    # at least two kills landed mid-run, so the equality below always means something.
    for trial in range(4):
        killed = tmp_path / f"killed{trial}"
        kills = interrupted_run(killed, rng)
        if kills >= 2:
            break
    assert kills >= 2, "the kills must land before completion for this test to mean anything"

    assert table(killed, "generations") == table(clean, "generations")
    assert table(killed, "scores") == table(clean, "scores")
    metrics_clean = json.loads((clean / "metrics.json").read_text())
    metrics_killed = json.loads((killed / "metrics.json").read_text())
    assert metrics_killed == metrics_clean
    assert metrics_clean["overall"]["n_generations"] == 36 * 4
    leftovers = [p for p in killed.rglob(".tmp-*")]
    assert len(leftovers) <= kills  # a kill mid-write may leave a temp file; it is never read
    manifest = json.loads((killed / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumed_at"]) >= kills
