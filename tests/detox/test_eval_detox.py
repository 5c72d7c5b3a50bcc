"""``polytox eval --detox ... --fluency-model ...`` end to end on a tiny model: metrics, resume guard, compare."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from polytox.cli.main import main
from polytox.errors import SpecMismatchError
from polytox.runner import execute_run as evaluate
from polytox.spec import spec_from_flat

from ..tiny_hf import one_torch_thread
from ..tiny_models import make_tiny_lm


def test_eval_with_detox_records_method_fluency_and_diversity(tmp_path: Path, shared_data: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    model = make_tiny_lm(tmp_path / "lm", arch="llama")
    words = tmp_path / "list.txt"
    words.write_text("idiot\n")
    flat = {"model": str(model), "prompts": str(shared_data / "rtp" / "toxic.jsonl"), "limit": 3, "samples": 2,
            "max_new_tokens": 5, "scorer": "lexicon", "scorer_opt": [f"dir={shared_data / 'ldnoobw'}"],
            "chat_template": "never", "fluency_model": str(model), "shard_size": 2}
    with one_torch_thread():
        plain = evaluate(spec_from_flat(flat), tmp_path / "plain")
        run = evaluate(spec_from_flat({**flat, "detox": f"word-filter:list={words}"}), tmp_path / "wf")
    m = run.metrics
    assert m["detox"] == f"word-filter:list={words}" and plain.metrics["detox"] is None
    assert m["fluency"]["n_scored"] + m["fluency"]["n_missing"] == 6 and m["fluency"]["mean_ppl"] > 1
    assert 0 < m["diversity"]["dist_1"] <= 1 and m["diversity"]["n_prompts"] == 3
    assert len(list((tmp_path / "wf" / "fluency").glob("*/part-*.parquet"))) == 2  # one per shard
    manifest = json.loads((tmp_path / "wf" / "manifest.json").read_text())
    assert manifest["spec"]["generation"]["detox"] == f"word-filter:list={words}"
    # another method in the same directory: refused; the same spec resumes
    with pytest.raises(SpecMismatchError), one_torch_thread():
        evaluate(spec_from_flat({**flat, "detox": f"word-filter:end=exact,list={words}"}), tmp_path / "wf")
    with one_torch_thread():
        again = evaluate(spec_from_flat({**flat, "detox": f"word-filter:list={words}"}), tmp_path / "wf")
    assert again.resumed and again.metrics["fluency"] == m["fluency"]
    # `polytox metrics RUN` recomputes toxicity and keeps the detox block (from the run's files alone)
    assert main(["metrics", str(tmp_path / "wf"), "--json"]) == 0
    recomputed = json.loads(capsys.readouterr().out)
    assert recomputed["fluency"] == m["fluency"] and recomputed["diversity"] == m["diversity"]
    assert recomputed["detox"] == m["detox"] and recomputed["overall"]["emt"] == m["overall"]["emt"]

    assert main(["detox", "compare", str(tmp_path / "plain"), str(tmp_path / "wf"), "--json", "-"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["none", f"word-filter:list={words}"]
    assert rows[1]["ppl"] == pytest.approx(m["fluency"]["mean_ppl"])
    gens = pq.read_table(tmp_path / "wf" / "generations").to_pydict()
    assert rows[1]["mean_tokens"] == pytest.approx(sum(gens["n_tokens"]) / len(gens["n_tokens"]))
    assert rows[1]["empty_share"] == sum(not t.strip() for t in gens["text"]) / len(gens["text"])

    # the leaderboard (and so the report) shows the method as its own row and the detox table
    md = tmp_path / "board.md"
    assert main(["leaderboard", str(tmp_path / "plain"), str(tmp_path / "wf"), "--markdown", str(md)]) == 0
    board = md.read_text()
    assert "+ word" in board.replace("\\", "")
    assert "Detoxification: toxicity, fluency and diversity" in board and "dist-2" in board
