"""Each research-question analysis against an independent pandas / SciPy computation from the Parquet
parts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from conftest import LX_LANGS, LX_MODELS, MODELS, XSS_MODEL, Built, frame, per_prompt_frame
from polytox.analysis import AnalysisOptions, RunCollection, load_meta_file, load_runs, run_analysis
from polytox.analysis.result import AnalysisResult, pm
from polytox.constants import CHALLENGING_THRESHOLD
from polytox.errors import PolytoxError


@pytest.fixture(scope="module")
def corpus(built: Built) -> RunCollection:
    return RunCollection(load_runs([built.root], load_meta_file(built.meta_yaml)))


@pytest.fixture(scope="module")
def rtp_frames(built: Built) -> pd.DataFrame:
    """Every RTP run's continuations with their svm scores, plus metadata columns."""
    parts = []
    for model, run in built.rtp.items():
        df = frame(run, "svm")
        df["model"] = model
        df["category"] = MODELS[model][2]
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def _d(a: np.ndarray, b: np.ndarray) -> float:
    pooled = ((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2)
    return float((a.mean() - b.mean()) / math.sqrt(pooled))


def _check_contrast(row: dict, a: np.ndarray, b: np.ndarray, d_key: str) -> None:  # type: ignore[type-arg]
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert row[d_key] == pytest.approx(_d(a, b), rel=1e-9)
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-9)
    assert row["p"] == pytest.approx(ref.pvalue, rel=1e-6)


def _at(built: Built, model: str, scorer: str = "svm") -> np.ndarray:
    return per_prompt_frame(frame(built.rtp[model], scorer))["mean"].to_numpy()


def test_language_per_language_tier_and_contrasts(corpus: RunCollection, built: Built) -> None:
    res = run_analysis("language", corpus, AnalysisOptions(prompt_sets=("RTP-LX",)))
    by_lang = {r["model"]: r for r in res.table("at_by_lang").records()}
    pooled = {}
    for model in LX_MODELS:
        pp = per_prompt_frame(pd.concat(frame(built.rtplx[(model, lg)], "fake") for lg in LX_LANGS))
        pooled[model] = pp
        for lang, part in pp.groupby("lang"):
            assert by_lang[model][lang] == pm(part["mean"].mean(), part["mean"].std(ddof=1))
    allpp = pd.concat(pooled.values())
    tiers = {"en": "high", "de": "high", "hi": "medium", "ru": "medium", "id": "low"}
    allpp["tier"] = allpp["lang"].map(tiers)
    summary = {r["tier"]: r for r in res.table("tier_pooled").records()}
    contrasts = {(r["tier A"], r["tier B"]): r for r in res.table("tier_contrasts").records()}
    for tier, part in allpp.groupby("tier"):
        assert summary[tier]["prompts"] == len(part)
    for a, b in itertools.combinations(["high", "medium", "low"], 2):
        _check_contrast(
            contrasts[(a, b)],
            allpp[allpp.tier == a]["mean"].to_numpy(),
            allpp[allpp.tier == b]["mean"].to_numpy(),
            "d (A − B)",
        )
    assert any("small sample" in n for n in res.notes)  # 12 prompts per language and model
    assert res.data["langs"] == sorted(LX_LANGS)


def test_size_contrasts_within_a_family(corpus: RunCollection, built: Built) -> None:
    res = run_analysis("size", corpus, AnalysisOptions(scorer="svm"))
    models = res.table("size_models").records()
    assert [r["model"] for r in models if r["family"] == "pythia"] == [
        "pythia-70m",
        "pythia-410m",
        "pythia-1.4b",
    ]
    pairs = {(r["smaller"], r["larger"]): r for r in res.table("size_pairs").records()}
    assert set(pairs) == {
        ("pythia-70m", "pythia-410m"),
        ("pythia-70m", "pythia-1.4b"),
        ("pythia-410m", "pythia-1.4b"),
    }
    for (small, large), row in pairs.items():
        _check_contrast(row, _at(built, large), _at(built, small), "d (larger − smaller)")
        assert row["shared prompts"] == len(set(frame(built.rtp[small], "svm").prompt_id))
    assert any("family tulu · RTP has one size only" in n for n in res.notes)
    assert not any("no family/params" in n for n in res.notes)  # every svm-scored model has metadata
    nometa = run_analysis("size", corpus, AnalysisOptions())
    assert any("no family/params metadata for" in n and XSS_MODEL in n for n in nometa.notes)


def test_category_and_alignment(corpus: RunCollection, built: Built, rtp_frames: pd.DataFrame) -> None:
    res = run_analysis("category", corpus, AnalysisOptions(prompt_sets=("RTP",)))
    pp = per_prompt_frame(rtp_frames).merge(rtp_frames.groupby("run")[["category"]].first(), on="run")
    groups = {c: part["mean"].to_numpy() for c, part in pp.groupby("category")}
    cats = {r["category"]: r for r in res.table("categories").records()}
    for c, values in groups.items():
        assert cats[c]["prompts"] == len(values)
        assert cats[c]["AT ± std"] == pm(values.mean(), values.std(ddof=1))
    pairs = {(r["category A"], r["category B"]): r for r in res.table("categories_pairs").records()}
    for a, b in [("base", "instruct"), ("base", "preference"), ("instruct", "preference")]:
        _check_contrast(pairs[(a, b)], groups[a], groups[b], "d (A − B)")
    methods = {MODELS[m][3]: _at(built, m) for m in MODELS if MODELS[m][3]}
    arows = {(r["alignment A"], r["alignment B"]): r for r in res.table("alignment_pairs").records()}
    assert set(arows) == set(itertools.combinations(sorted(methods), 2))
    for (a, b), row in arows.items():
        _check_contrast(row, methods[a], methods[b], "d (A − B)")


def test_prompt_vs_continuation_toxicity(corpus: RunCollection, rtp_frames: pd.DataFrame) -> None:
    res = run_analysis("prompt-toxicity", corpus, AnalysisOptions(prompt_sets=("RTP",)))
    rows = {(r["by"], r["group"], r["prompt subset"]): r for r in res.table("correlations").records()}
    ok = rtp_frames.dropna(subset=["score", "prompt_toxicity"])
    checks = {("overall", "all"): ok}
    for cat, part in ok.groupby("category"):
        checks[("category", cat)] = part
    for model, part in ok.groupby("model"):
        checks[("model", model)] = part
    for (by, group), part in checks.items():
        for subset, sel in (
            ("all", part),
            ("low-toxicity prompts", part[part.prompt_toxicity < 0.5]),
            ("high-toxicity prompts", part[part.prompt_toxicity >= 0.5]),
        ):
            ref = sps.pearsonr(sel["prompt_toxicity"], sel["score"])
            row = rows[(by, group, subset)]
            assert row["continuations"] == len(sel)
            assert row["r"] == pytest.approx(ref.statistic, rel=1e-9)
            assert row["p"] == pytest.approx(ref.pvalue, rel=1e-6)
    unscored = int(rtp_frames["score"].isna().sum())
    assert any(f"{unscored} continuation(s) without a score left out" in n for n in res.notes)
    assert res.data["n"] == len(ok)


def test_scorer_agreement_and_top_disagreements(corpus: RunCollection, built: Built) -> None:
    res = run_analysis("scorers", corpus, AnalysisOptions(scorer="svm", scorer_b="fake", top=3))
    a = pd.concat(frame(run, "svm") for run in built.rtp.values())
    b = pd.concat(frame(run, "fake") for run in built.rtp.values())
    both = a.merge(
        b[["run", "prompt_id", "sample_index", "score"]],
        on=["run", "prompt_id", "sample_index"],
        suffixes=("_a", "_b"),
    ).reset_index(drop=True)
    scored = both.dropna(subset=["score_a", "score_b"])
    stats = dict(res.table("agreement").rows)
    ref = sps.pearsonr(scored["score_a"], scored["score_b"])
    assert stats["scored by both"] == len(scored)
    assert stats["continuations in both"] == len(both)
    assert stats["Pearson r"] == pytest.approx(ref.statistic, rel=1e-9)
    assert stats["label agreement"] == pytest.approx(
        ((scored.score_a >= 0.5) == (scored.score_b >= 0.5)).mean()
    )
    top = res.table("a_over_b").records()
    diff = (scored["score_a"] - scored["score_b"]).sort_values(ascending=False)
    assert [r["difference"] for r in top] == pytest.approx(diff.iloc[:3].tolist())
    assert top[0]["continuation"] == scored.loc[diff.index[0], "text"]
    assert top[0]["prompt"] == scored.loc[diff.index[0], "prompt_text"]
    low = res.table("b_over_a").records()
    assert low[0]["difference"] == pytest.approx(diff.iloc[-1])
    assert any("have no scores of svm" in n for n in res.notes)  # the RTP-LX and echo runs
    with pytest.raises(PolytoxError, match="two stored scorers"):
        run_analysis("scorers", corpus, AnalysisOptions(scorer="svm"))


def test_challenging_prompts(corpus: RunCollection, rtp_frames: pd.DataFrame) -> None:
    res = run_analysis("challenging", corpus, AnalysisOptions())
    per = rtp_frames.groupby(["prompt_id", "model"])["score"].max().unstack()
    assert per.notna().all().all()  # every model scored every prompt here
    expected = sorted(f"RTP:{pid}" for pid in per.index[(per >= CHALLENGING_THRESHOLD).all(axis=1)])
    got = [i for i in res.data["challenging_ids"] if i.startswith("RTP:")]
    assert got == expected
    assert expected, "the test data should contain challenging prompts"
    summary = {r["prompt set"]: r for r in res.table("summary").records()}
    assert summary["RTP"]["models"] == len(MODELS)
    assert summary["RTP"]["challenging"] == len(expected)
    assert summary["RTP"]["share"] == pytest.approx(len(expected) / len(per))
    listed = res.table("prompts").records()
    assert all(r["min over models of max score"] >= CHALLENGING_THRESHOLD for r in listed)
    assert any("only one model" in n for n in res.notes)  # the echo model's prompt set


def test_challenging_counts_undetermined_prompts(corpus: RunCollection, built: Built, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    for model in ("pythia-70m", "pythia-1.4b"):
        shutil.copytree(built.rtp[model], tmp_path / model)
    (svm,) = [d for d in (tmp_path / "pythia-1.4b" / "scores").iterdir() if d.name.startswith("svm")]
    removed = pd.read_parquet(svm / "part-00000.parquet")
    (svm / "part-00000.parquet").unlink()
    res = run_analysis("challenging", RunCollection(load_runs([tmp_path])), AnalysisOptions())
    a = frame(built.rtp["pythia-70m"], "svm").groupby("prompt_id")["score"].max()
    lost = set(removed.prompt_id)
    undetermined = sum(1 for pid in lost if a[pid] >= CHALLENGING_THRESHOLD)
    (row,) = res.table("summary").records()
    assert row["undetermined"] == undetermined
    assert row["scored by every model"] == len(a) - len(lost)


def test_prompt_sources(corpus: RunCollection, built: Built) -> None:
    res = run_analysis("sources", corpus, AnalysisOptions(scorer="fake"))
    rows = {r["model"]: r for r in res.table("by_source").records()}
    pairs = {r["model"]: r for r in res.table("source_pairs").records()}
    assert set(pairs) == set(LX_MODELS)
    for model in LX_MODELS:
        rtp = _at(built, model, "fake")
        lx = per_prompt_frame(pd.concat(frame(built.rtplx[(model, lg)], "fake") for lg in LX_LANGS))[
            "mean"
        ].to_numpy()
        assert rows[model]["RTP AT ± std"] == pm(rtp.mean(), rtp.std(ddof=1))
        assert rows[model]["RTP-LX n"] == len(lx)
        _check_contrast(pairs[model], rtp, lx, "d (A − B)")
    lang_rows = res.table("by_source_lang").records()
    assert {(r["model"], r["lang"]) for r in lang_rows} == {(m, "en") for m in LX_MODELS}
    assert any("evaluated on one prompt set only" in n for n in res.notes)


def test_emt_vs_k_is_the_exact_subset_expectation(corpus: RunCollection, built: Built) -> None:
    res = run_analysis("emt-k", corpus, AnalysisOptions(prompt_sets=("RTP",), models=("pythia-410m",)))
    emt = res.table("emt_k").records()[0]
    ep = res.table("ep_k").records()[0]
    df = frame(built.rtp["pythia-410m"], "svm")
    scores = [g.dropna().to_numpy() for _, g in df.groupby("prompt_id")["score"]]
    for k in range(1, 6):
        usable = [s for s in scores if len(s) >= k]
        brute = np.mean([np.mean([max(c) for c in itertools.combinations(s, k)]) for s in usable])
        prob = np.mean(
            [np.mean([any(v >= 0.5 for v in c) for c in itertools.combinations(s, k)]) for s in usable]
        )
        assert float(emt[f"K={k}"]) == pytest.approx(brute, abs=5e-4)  # cells are rounded to 3 decimals
        assert float(ep[f"K={k}"]) == pytest.approx(prob, abs=5e-4)
    series = res.data["series"][0]
    pp = per_prompt_frame(df)
    assert series["emt"][0] == pytest.approx(pp["mean"].mean())  # k = 1: the mean, i.e. AT
    full = [s for s in scores if len(s) == 5]
    assert series["emt"][4] == pytest.approx(np.mean([s.max() for s in full]))
    assert any(
        "fewer than k scored continuations" in n and f"k=5: {len(scores) - len(full)}" in n for n in res.notes
    )
    picked = run_analysis("emt-k", corpus, AnalysisOptions(prompt_sets=("RTP",), ks=(2, 4)))
    assert picked.table("emt_k").columns[2:] == ("K=2", "K=4")


def test_every_analysis_runs_on_every_run_and_reports_missing_data(corpus: RunCollection) -> None:
    from polytox.analysis import ANALYSES

    for name in ANALYSES:
        opts = AnalysisOptions(scorer="svm", scorer_b="fake") if name == "scorers" else AnalysisOptions()
        res = run_analysis(name, corpus, opts)
        assert isinstance(res, AnalysisResult) and res.tables
        assert all(len(row) == len(t.columns) for t in res.tables for row in t.rows)
        assert res.to_dict()["key"] == res.key
    res = run_analysis("size", corpus, AnalysisOptions())
    assert any("different scorers" in n for n in res.notes)  # mixing svm and fake is flagged
