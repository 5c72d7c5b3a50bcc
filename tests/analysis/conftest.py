"""Test runs for the analyses and the report, built once per session from real prompts.

- ``rtp/<model>``: 7 fake "models" (distinct toxicity/echo options) over a seeded stratified sample of
  the real RealToxicityPrompts records in ../shared/data/rtp, scored by the offline 'svm' scorer; the
  'fake' scorer's scores are then stored on the same continuations (two scorers for the agreement
  analysis). One model fails 10% of its generations (failures are data).
- ``rtplx/<model>-<lang>``: 3 of the models over RTP-LX prompts in 5 languages (one run per language,
  as PTP runs one config per language), scored by the 'fake' scorer (the 'svm' one is English only).
- ``xss/echo``: a model that echoes hostile prompts (``<script>``, ``onerror=``) into its continuations.

Metadata comes from a user YAML for most models and from the manifest (``model_meta``) for one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from polytox import registry
from polytox.executors.shards import score_generations, shards
from polytox.runner import execute_run as evaluate
from polytox.scoring import build_scorer
from polytox.spec import spec_from_flat
from polytox.store import RunStore

# model: (family, params, category, alignment, fake toxicity, fake echo)
MODELS: dict[str, tuple[str, str, str, str | None, float, float]] = {
    "pythia-70m": ("pythia", "70m", "base", None, 0.04, 0.1),
    "pythia-410m": ("pythia", "410m", "base", None, 0.09, 0.25),
    "pythia-1.4b": ("pythia", "1.4b", "base", None, 0.16, 0.4),
    "tulu-7b-sft": ("tulu", "7b", "instruct", "SFT", 0.06, 0.2),
    "tulu-7b-dpo": ("tulu", "7b", "preference", "DPO", 0.03, 0.1),
    "tulu-7b-kto": ("tulu", "7b", "preference", "KTO", 0.035, 0.1),
    "tulu-7b-ppo": ("tulu", "7b", "preference", "PPO", 0.05, 0.15),
}
MANIFEST_META_MODEL = "pythia-1.4b"  # its metadata lives in the run manifest, not the YAML
FAILING_MODEL = "pythia-410m"  # 10% of its generations fail
LX_MODELS = ("pythia-70m", "pythia-1.4b", "tulu-7b-dpo")
LX_LANGS = ("en", "de", "hi", "ru", "id")  # high, high, medium, medium, low
SAMPLES = 5
XSS_PROMPTS = [
    {
        "id": "xss-script",
        "lang": "en",
        "toxicity": 0.9,
        "text": "<script>window.__polytoxXss = 'script';</script> hello",
    },
    {
        "id": "xss-img",
        "lang": "en",
        "toxicity": 0.1,
        "text": "<img src=x onerror=\"window.__polytoxXss='onerror'\"> and a <b>bold</b> | pipe `tick` "
        "[link](x)",
    },
    {
        "id": "xss-attr",
        "lang": "en",
        "toxicity": 0.6,
        "text": '"><svg onload="window.__polytoxXss=\'svg\'"></svg> &amp; &lt;',
    },
]
XSS_MODEL = "echo<i>-model</i>"


@dataclass
class Built:
    root: Path
    meta_yaml: Path
    rtp: dict[str, Path] = field(default_factory=dict)
    rtplx: dict[tuple[str, str], Path] = field(default_factory=dict)
    xss: Path | None = None

    @property
    def rtp_dirs(self) -> list[Path]:
        return list(self.rtp.values())

    @property
    def rtplx_dirs(self) -> list[Path]:
        return list(self.rtplx.values())


def add_scorer(run: Path, name: str) -> str:
    """Store a second scorer's scores on a run's existing continuations (what a rescore does)."""
    store = RunStore(run)
    scorer = build_scorer(name, {"cache": "off"})
    prompts = pq.read_table(store.prompts_path, columns=["prompt_id", "lang"]).to_pylist()
    langs = {p["prompt_id"]: p["lang"] for p in prompts}
    n_shards = len(shards(prompts, store.spec().shard_size))
    for shard in range(n_shards):
        gens = store.read_generations(shard)
        store.write_scores(scorer.id, shard, gens, score_generations(scorer, gens, langs), scorer.attributes)
    return scorer.id


def _eval(out: Path, **flat: object) -> Path:
    spec = spec_from_flat({"samples": SAMPLES, "max_new_tokens": 10, "shard_size": 16, **flat})
    evaluate(spec, out)
    return out


@pytest.fixture(scope="session")
def built(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_runs(shared_data, tmp_path_factory.mktemp("analysis-runs"))


def build_runs(shared_data: Path, root: Path) -> Built:
    """Evaluate every test run into ``root`` (see the module docstring)."""
    meta = {
        "models": {
            m: {"family": f, "params": p, "category": c, **({"alignment": a} if a else {})}
            for m, (f, p, c, a, _, _) in MODELS.items()
            if m != MANIFEST_META_MODEL
        }
    }
    meta_yaml = root / "models.yaml"
    import yaml

    meta_yaml.write_text(yaml.safe_dump(meta), encoding="utf-8")
    b = Built(root=root, meta_yaml=meta_yaml)
    for model, (family, params, category, _, tox, echo) in MODELS.items():
        opts = [f"toxicity={tox}", f"echo={echo}"] + (["fail_rate=0.1"] if model == FAILING_MODEL else [])
        run = _eval(
            root / "rtp" / model,
            model=f"fake:{model}",
            prompts=str(shared_data / "rtp"),
            per_bucket=8,
            skip_bad=True,
            scorer="svm",
            scorer_opt=["cache=off"],
            model_opt=opts,
        )
        if model == MANIFEST_META_MODEL:
            RunStore(run).update_manifest(
                model_meta={"family": family, "params": params, "category": category}
            )
        add_scorer(run, "fake")
        b.rtp[model] = run
    for model in LX_MODELS:
        _, _, _, _, tox, echo = MODELS[model]
        for lang in LX_LANGS:
            src = shared_data / "rtp-lx" / f"RTP_LX_{lang.upper()}.jsonl"
            b.rtplx[(model, lang)] = _eval(
                root / "rtplx" / f"{model}-{lang}",
                model=f"fake:{model}",
                prompts=str(src),
                per_bucket=3,
                scorer="fake",
                scorer_opt=["cache=off"],
                model_opt=[f"toxicity={tox}", f"echo={echo}"],
            )
    src = root / "xss_prompts.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in XSS_PROMPTS), encoding="utf-8")
    registry.register("generator", "echo", "analysis_echo:EchoGenerator")
    try:
        b.xss = _eval(
            root / "xss" / "echo",
            model=XSS_MODEL,
            backend="echo",
            prompts=str(src),
            scorer="fake",
            scorer_opt=["cache=off"],
            samples=2,
        )
    finally:
        registry.unregister("generator", "echo")
    return b


def frame(run: Path, scorer_prefix: str) -> pd.DataFrame:
    """One row per stored continuation of ``run`` with its ``scorer_prefix`` score, read with pandas
    straight from the Parquet parts (independently of the DuckDB code under test)."""
    store = RunStore(run)
    gens = pd.concat([pd.read_parquet(p) for p in sorted((run / "generations").glob("part-*.parquet"))])
    (scorer_dir,) = [d for d in store.scorer_ids() if d.startswith(scorer_prefix)]
    scores = pd.concat(
        [pd.read_parquet(p) for p in sorted(store.scores_dir(scorer_dir).glob("part-*.parquet"))]
    )
    prompts = pd.read_parquet(store.prompts_path)[["prompt_id", "lang", "toxicity", "text"]]
    prompts = prompts.rename(columns={"toxicity": "prompt_toxicity", "text": "prompt_text"})
    merged = gens.merge(
        scores.rename(columns={"error": "score_error"}), on=["prompt_id", "sample_index"], how="left"
    ).merge(prompts, on="prompt_id", how="left")
    merged["score"] = merged["toxicity"]
    merged["run"] = run.name
    return merged


def per_prompt_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per prompt: mean and max of the scores that exist (pandas skips NaN), prompts with a score only."""
    g = df.groupby(["run", "prompt_id"], sort=True)
    out = pd.DataFrame(
        {
            "mean": g["score"].mean(),
            "max": g["score"].max(),
            "n": g["score"].count(),
            "lang": g["lang"].first(),
            "prompt_toxicity": g["prompt_toxicity"].first(),
        }
    )
    return out[out["n"] > 0].reset_index()


@pytest.fixture(scope="session")
def full_report(built: Built):  # type: ignore[no-untyped-def]
    """The report over every test run (with plots), built once."""
    from polytox.analysis import AnalysisOptions, RunCollection, load_meta_file, load_runs
    from polytox.report.build import build_report

    corpus = RunCollection(load_runs([built.root], load_meta_file(built.meta_yaml)))
    return build_report(corpus, AnalysisOptions(top=5), title="polytox test report")


@pytest.fixture(scope="session")
def report_html(full_report, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    from polytox.report.html import render_html

    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(full_report), encoding="utf-8")
    return path
