"""The spec: CLI flags and a YAML --config build the same spec; presets follow the papers exactly;
invalid values fail clearly; a spec survives the manifest round trip with the same hash."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from polytox.cli.eval_cmd import spec_from_args
from polytox.cli.main import build_parser
from polytox.errors import PolytoxError
from polytox.spec import EMBEDDED_MODEL, EvalSpec, spec_from_flat

from .core_helpers import eval_args, read_json, run_cli


def spec_of(*argv: str) -> EvalSpec:
    return spec_from_args(build_parser().parse_args(["eval", "--out", "x", *argv]))


FLAGS = ["--model", "fake", "--prompts", "demo", "--lang", "en", "--lang", "de", "--limit", "7",
         "--samples", "3", "--max-new-tokens", "12", "--temperature", "1", "--top-p", "0.95", "--top-k", "40",
         "--seed", "9", "--batch-size", "4", "--scorer", "fake", "--scorer-opt", "fail_rate=0.1",
         "--model-opt", "toxicity=0.2", "--model-opt", "echo=0", "--threshold", "0.5", "--comparison", ">",
         "--shard-size", "5", "--skip-bad", "--per-bucket", "2", "--format", "generic"]

CONFIG = """\
model: fake
prompts: demo
lang: [en, de]
limit: 7
samples: 3
max-new-tokens: 12
temperature: 1          # an int in YAML, a float as a flag: the same spec
top_p: 0.95
top_k: 40
seed: 9
batch_size: 4
scorer: fake
scorer_opt: {fail_rate: 0.1}
model_opt: [toxicity=0.2, echo=0]
threshold: 0.5
comparison: ">"
shard_size: 5
skip_bad: true
per_bucket: 2
format: generic
"""


def test_yaml_config_builds_the_same_spec_as_flags(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(CONFIG)
    from_flags = spec_of(*FLAGS)
    from_yaml = spec_of("--config", str(config))
    assert from_yaml == from_flags
    assert from_yaml.spec_hash() == from_flags.spec_hash()
    g = from_flags.generation
    assert (g.model, g.backend, g.samples, g.max_new_tokens, g.temperature, g.top_p, g.top_k) == (
        "fake", "fake", 3, 12, 1.0, 0.95, 40)
    assert isinstance(from_yaml.generation.temperature, float)
    assert dict(g.options) == {"toxicity": "0.2", "echo": "0"}
    assert from_flags.prompts.langs == ("en", "de") and from_flags.prompts.skip_bad is True
    assert dict(from_flags.scorer.options) == {"fail_rate": "0.1"}
    assert (from_flags.metrics.comparison, from_flags.seed, from_flags.shard_size) == (">", 9, 5)


def test_flags_override_the_config(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(CONFIG)
    spec = spec_of("--config", str(config), "--samples", "6", "--lang", "ja")
    assert spec.generation.samples == 6 and spec.prompts.langs == ("ja",)
    assert spec.generation.top_k == 40  # the rest still comes from the file


def test_lang_forms_agree() -> None:
    assert (spec_of("--lang", "en,DE").prompts.langs == spec_of("--lang", "en", "--lang", "de").prompts.langs
            == spec_from_flat({"lang": ["en", "de"]}).prompts.langs == ("en", "de"))


def test_config_and_flags_resume_the_same_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The end-to-end version: a run started from a config is resumed by the equivalent flags."""
    config = tmp_path / "eval.yaml"
    config.write_text("model: fake\nscorer: fake\nsamples: 2\nlimit: 3\ntemperature: 1\nlang: en\n")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "eval", "--out", str(out), "--config", str(config), "--no-progress")
    assert code == 0, err
    code, _, err = run_cli(capsys, *eval_args(out, samples=2, limit=3, temperature=1.0, lang="en"))
    assert code == 0, err
    assert ": 1 shard(s) were already done" in err  # resumed, not refused
    assert read_json(out / "manifest.json")["resumed_at"]


def test_defaults_are_the_embedded_model_and_rtp_settings() -> None:
    spec = spec_of()
    g = spec.generation
    assert (g.model, g.backend) == (EMBEDDED_MODEL, "transformers")
    assert (g.samples, g.top_p, g.temperature, g.max_new_tokens) == (25, 0.9, 1.0, 20)
    assert spec.scorer.name == "default" and spec.prompts.source == "demo"
    assert (spec.metrics.threshold, spec.metrics.comparison, spec.metrics.n_bootstrap) == (0.5, ">=", 1000)


# ---- presets: the papers' exact settings ------------------------------------------------------------
def test_rtp_preset_follows_the_paper() -> None:
    """RTP §4.2 / App. B.4: K = 25, nucleus p = 0.9, temperature 1, up to 20 tokens."""
    g = spec_of("--preset", "rtp").generation
    assert (g.samples, g.top_p, g.temperature, g.max_new_tokens, g.top_k) == (25, 0.9, 1.0, 20, 0)


def test_ptp_preset_follows_the_paper() -> None:
    """PTP §4: K = 10, temperature 0.7, top_p 1.0, up to 512 tokens."""
    g = spec_of("--preset", "ptp").generation
    assert (g.samples, g.top_p, g.temperature, g.max_new_tokens, g.top_k) == (10, 1.0, 0.7, 512, 0)


def test_explicit_flags_override_a_preset(tmp_path: Path) -> None:
    g = spec_of("--preset", "ptp", "--max-new-tokens", "32").generation
    assert (g.samples, g.temperature, g.max_new_tokens) == (10, 0.7, 32)
    config = tmp_path / "c.yaml"
    config.write_text("preset: ptp\nmax_new_tokens: 32\n")
    assert spec_of("--config", str(config)).generation == g
    assert spec_of("--preset", "rtp").preset == "rtp"


def test_preset_is_not_part_of_the_run_identity() -> None:
    """``--preset rtp`` and the same values as flags produce the same stored generations: same hash."""
    a = spec_of("--preset", "rtp")
    b = spec_of("--samples", "25", "--top-p", "0.9", "--temperature", "1", "--max-new-tokens", "20")
    assert a.spec_hash() == b.spec_hash()


# ---- invalid values ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("flat", "message"), [
    ({"samples": 0}, "samples must be in [1, 10000]"),
    ({"top_p": 0}, "top_p must be in (0, 1]"),
    ({"top_p": 1.5}, "top_p must be in (0, 1]"),
    ({"temperature": -1}, "temperature must be >= 0"),
    ({"threshold": 2}, "threshold must be in [0, 1]"),
    ({"comparison": "<"}, "comparison must be one of"),
    ({"limit": 0}, "limit must be >= 1"),
    ({"shard_size": 0}, "shard_size must be >= 1"),
    ({"samples": "many"}, "invalid value for 'samples': expected an integer, got 'many'"),
    ({"samples": 2.5}, "invalid value for 'samples': expected an integer, got 2.5"),
    ({"temperature": "hot"}, "invalid value for 'temperature': expected a number, got 'hot'"),
    ({"seed": True}, "invalid value for 'seed': expected an integer, got True"),
    ({"preset": "gpt"}, "unknown preset 'gpt'; known: rtp, ptp"),
    ({"samplez": 3}, "unknown config key(s): samplez"),
    ({"model_opt": "novalue"}, "option 'novalue' is not KEY=VALUE"),
    ({"lang": "xx"}, "unknown language code 'xx'"),
])
def test_invalid_values_fail_clearly(flat: dict[str, object], message: str) -> None:
    with pytest.raises(PolytoxError) as info:
        spec_from_flat(flat)
    assert message in str(info.value)


def test_numeric_strings_from_yaml_are_accepted() -> None:
    spec = spec_from_flat({"samples": "5", "temperature": "0.7", "seed": 3.0})
    assert (spec.generation.samples, spec.generation.temperature, spec.seed) == (5, 0.7, 3)


def test_bad_config_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("- a list\n- not a mapping\n")
    code, _, err = run_cli(capsys, "eval", "--out", str(tmp_path / "r"), "--config", str(config))
    assert code == 2 and "a config must be a mapping" in err
    config.write_text("samples: 2\nsampels: 3\n")
    code, _, err = run_cli(capsys, "eval", "--out", str(tmp_path / "r"), "--config", str(config))
    assert code == 2 and f"{config}:2: unknown config key 'sampels' (did you mean 'samples'?)" in err
    assert not (tmp_path / "r").exists()


# ---- the manifest round trip ------------------------------------------------------------------------
def test_spec_round_trips_through_a_manifest() -> None:
    spec = spec_of(*FLAGS)
    again = EvalSpec.from_dict(yaml.safe_load(yaml.safe_dump(spec.to_dict())))
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert spec_of("--model", "fake").generation.backend == "fake"
    assert spec_of("--model", "gpt2").generation.backend == "transformers"
    assert spec_of("--model", "fake:loud").generation == spec_of("--model", "loud", "--backend",
                                                                 "fake").generation
