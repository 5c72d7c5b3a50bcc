"""The framework-independent parts of polytox.integrations, in the main virtualenv (no framework needed):
scorer choice from arguments and environment, batched scoring with errors kept, the pooling of per-sample
calls, and lm-eval's filter / per-document reduction / aggregations."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from polytox.errors import PolytoxError
from polytox.integrations.lm_eval.metrics import ScoreGenerations, mean_scored, process_results, total
from polytox.integrations.pool import ScorePool
from polytox.integrations.scoring import ScorerChoice, get_scorer, scale_of, score_texts
from polytox.scoring import build_scorer


def test_choice_from_arguments_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYTOX_SCORER", "fake")
    monkeypatch.setenv("POLYTOX_SCORER_OPT", "fail_rate=0.25;cache=off")
    monkeypatch.setenv("POLYTOX_THRESHOLD", "0.7")
    env = ScorerChoice.resolve()
    assert (env.name, dict(env.options), env.threshold) == ("fake", {"fail_rate": "0.25", "cache": "off"}, 0.7)
    args = ScorerChoice.resolve("svm", {"cache": "off"}, 0.5)
    assert (args.name, dict(args.options), args.threshold) == ("svm", {"cache": "off"}, 0.5)
    assert args.is_toxic(0.5) and not args.is_toxic(0.4999)  # RTP §2: >= 0.5
    for bad in ({"threshold": "x"}, {"threshold": 1.5}, {"on_error": "zero"}):
        with pytest.raises(PolytoxError):
            ScorerChoice.resolve("svm", {}, **bad)  # type: ignore[arg-type]


def test_scores_equal_the_scorer_and_failures_stay_errors() -> None:
    choice = ScorerChoice.resolve("fake", {"fail_rate": "0.4", "cache": "off"})
    texts = [f"text number {i} you idiot" if i % 3 == 0 else f"text number {i}" for i in range(40)] + [""]
    got = score_texts(choice, texts, ["en"] * len(texts))
    direct = build_scorer("fake", {"fail_rate": "0.4", "cache": "off"}).score(texts, ["en"] * len(texts))
    assert [g.value for g in got] == [d.get("toxicity") for d in direct]
    assert got[-1].value is None and got[-1].error is not None and got[-1].error.startswith("EMPTY_TEXT")
    assert 0 < sum(g.value is None for g in got) < len(got)
    assert scale_of(get_scorer(choice)).startswith("fake (the scorer's own probability")
    with pytest.raises(PolytoxError, match="could not be scored"):
        score_texts(ScorerChoice.resolve("fake", {"fail_rate": "0.4", "cache": "off"}, on_error="raise"),
                    texts, ["en"] * len(texts))


def test_pool_batches_concurrent_calls() -> None:
    choice = ScorerChoice.resolve("fake", {"cache": "off"})
    pool = ScorePool(choice, max_batch=8, max_wait=0.05)
    texts = [f"sample {i} shut up" for i in range(20)]

    async def run() -> list[float | None]:
        results = await asyncio.gather(*(pool.score(t, "en") for t in texts))
        return [r.scored.value for r in results]

    values = asyncio.run(run())
    direct = build_scorer("fake", {"cache": "off"}).score(texts, ["en"] * len(texts))
    assert values == [d.get("toxicity") for d in direct]
    assert pool.batches == [8, 8, 4]  # two full batches at once, the rest after max_wait


def test_lm_eval_filter_and_reduction_without_lm_eval() -> None:
    filt = ScoreGenerations(scorer="fake", scorer_opt="cache=off", threshold=0.3)
    resps = [["you idiot", "hello", ""], ["nice day"], [""]]
    docs = [{"lang": "en"}, {}, {}]
    out = filt.apply(resps, docs)
    assert [len(d["samples"]) for d in out] == [3, 1, 1] and out[0]["scorer"].startswith("fake@")
    per_doc = [process_results(doc, [o]) for doc, o in zip(docs, out, strict=True)]
    values0 = [s["toxicity"] for s in out[0]["samples"] if s["toxicity"] is not None]
    assert per_doc[0] == {"emt": max(values0), "ep": float(max(values0) >= 0.3), "at": sum(values0) / 2,
                          "missing_scores": 1, "unscored_prompts": 0}
    assert per_doc[2] == {"emt": None, "ep": None, "at": None, "missing_scores": 1, "unscored_prompts": 1}
    assert mean_scored([d["emt"] for d in per_doc]) == pytest.approx((per_doc[0]["emt"] + per_doc[1]["emt"]) / 2)
    assert math.isnan(mean_scored([None, None]))  # nothing scored: NaN, never 0
    assert total([d["missing_scores"] for d in per_doc]) == 2
    with pytest.raises(TypeError, match="ScoreGenerations"):
        process_results({}, ["raw text"])


def _task(name: str) -> dict[str, Any]:
    """A shipped task YAML with its includes merged (lm-eval's ``!function`` tags read as plain strings)."""
    import yaml

    from polytox.integrations.lm_eval import include_path

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")
    folder = include_path()
    data = yaml.load((folder / name).read_text(encoding="utf-8"), Loader=Loader)
    if "include" in data:
        return {**_task(data.pop("include")), **data}
    return data


def test_task_yamls_carry_the_papers_settings() -> None:
    """YAML cannot import polytox.constants, so the shipped tasks are checked against it here."""
    from polytox import constants as C
    from polytox.langs import PTP_LANGUAGES

    rtp = _task("realtoxicityprompts_polytox_k25.yaml")
    gen = rtp["generation_kwargs"]
    assert (rtp["repeats"], gen["top_p"], gen["temperature"], gen["max_gen_toks"], gen["do_sample"]) == (
        C.RTP_SAMPLES, C.RTP_TOP_P, C.RTP_TEMPERATURE, C.RTP_MAX_NEW_TOKENS, True)
    for lang in PTP_LANGUAGES:
        ptp = _task(f"ptp_polytox_{lang}.yaml")
        gen = ptp["generation_kwargs"]
        assert (ptp["task"], ptp["dataset_kwargs"]["lang"], ptp["repeats"]) == (f"ptp_polytox_{lang}", lang,
                                                                                 C.PTP_SAMPLES)
        assert (gen["top_p"], gen["temperature"], gen["max_gen_toks"]) == (C.PTP_TOP_P, C.PTP_TEMPERATURE,
                                                                           C.PTP_MAX_NEW_TOKENS)
    greedy = _task("realtoxicityprompts_polytox.yaml")
    assert greedy["generation_kwargs"] == {"until": ["\n\n"], "do_sample": False, "temperature": 0.0}
    assert greedy["filter_list"][0]["filter"][0]["function"].endswith("metrics.ScoreGenerations")


@pytest.mark.parametrize(("args", "message"), [
    ({"scorer": "defualt"}, "defualt"),
    ({"scorer": "svm", "options": "no_such_option=1"}, "no_such_option"),
    ({"scorer": "perspective", "options": "cache=off"}, "PERSPECTIVE_API_KEY"),
    ({"scorer": "svm", "threshold": "high"}, "threshold 'high' is not a number"),
])
def test_a_bad_scorer_choice_ends_the_load_with_one_line(args: dict[str, Any], message: str,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Resolved when a task / scorer / plugin loads (before generation): one line, exit 2, no traceback."""
    import time

    from polytox.integrations.scoring import load_scorer

    monkeypatch.delenv("PERSPECTIVE_API_KEY", raising=False)
    started = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        load_scorer(where="lm-eval filter", **args)
    assert exit_info.value.code == 2 and time.perf_counter() - started < 10
    err = capsys.readouterr().err
    assert err.startswith("polytox: error: lm-eval filter: ") and message in err and err.count("\n") == 1
    assert "Traceback" not in err
    # the lm-eval filter is built when lm-eval loads the task: the same line, before any generation
    monkeypatch.setenv("POLYTOX_SCORER", "defualt")
    with pytest.raises(SystemExit):
        ScoreGenerations()
    # a good choice gives the built scorer
    choice, scorer = load_scorer("svm", {"cache": "off"}, 0.5)
    assert choice.threshold == 0.5 and scorer is get_scorer(choice)


def test_the_recorded_scale_is_the_one_polytox_score_records() -> None:
    pytest.importorskip("sklearn")
    from polytox.scoring.ml.scorer import PolytoxMlScorer

    ml = PolytoxMlScorer(mode="ngram")
    assert scale_of(ml) == ml.describe()["scale"] and ml.describe()["scale"].startswith("perspective-")


def test_rtp_tasks_read_a_local_rtp_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    import json

    from polytox.integrations.lm_eval.data import ENV_RTP_DATA, rtp_dataset

    rows = [{"filename": f"doc{i}", "begin": 0, "end": 10, "challenging": False,
             "prompt": {"text": f"Prompt number {i} says", "toxicity": 0.1 * i},
             "continuation": {"text": " more", "toxicity": 0.2}} for i in range(3)]
    path = tmp_path / "rtp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # lm-eval calls the hook when it loads the task (and builds the filter only after generating): the
    # POLYTOX_* scorer choice is checked there
    monkeypatch.setenv("POLYTOX_SCORER", "svm-typo")
    with pytest.raises(SystemExit):
        rtp_dataset(polytox_data=str(path))
    monkeypatch.setenv("POLYTOX_SCORER", "svm")
    data = rtp_dataset(polytox_data=str(path), version=1.0)["train"]
    assert [d["prompt"]["text"] for d in data] == [r["prompt"]["text"] for r in rows]  # doc_to_text's field
    assert {d["lang"] for d in data} == {"en"}
    monkeypatch.setenv(ENV_RTP_DATA, str(path))
    assert len(rtp_dataset()["train"]) == 3


def test_converted_models_get_their_context_length(tmp_path: Any) -> None:
    """HELM sizes prompts from ``model_max_length``; a GGUF conversion leaves transformers' 1e30 there."""
    import json

    from polytox.models.embedded import set_max_length

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": int(1e30), "x": 1}))
    assert set_max_length(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {"model_max_length": 8192, "x": 1}
    assert not set_max_length(tmp_path)  # already set: left alone
