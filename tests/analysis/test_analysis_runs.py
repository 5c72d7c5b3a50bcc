"""Run discovery and model metadata: manifest fields, the user YAML, and clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import LX_LANGS, LX_MODELS, MANIFEST_META_MODEL, MODELS, Built
from polytox.analysis.runs import (
    ModelMeta,
    discover,
    format_params,
    load_meta_file,
    load_runs,
    parse_params,
)
from polytox.errors import PolytoxError
from polytox.store import RunStore, write_manifest_file


@pytest.mark.parametrize(
    "raw,value",
    [
        ("70m", 70e6),
        ("1.4B", 1.4e9),
        ("7b", 7e9),
        (" 410 M ", 410e6),
        ("1,400,000,000", 1.4e9),
        (125000000, 125e6),
        (2.5e9, 2.5e9),
        (None, None),
        ("", None),
    ],
)
def test_parse_params(raw: object, value: float | None) -> None:
    assert parse_params(raw) == (pytest.approx(value) if value is not None else None)


@pytest.mark.parametrize("raw", ["big", "7 gb", "-3m", True, 0])
def test_parse_params_rejects(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_params(raw)


def test_format_params() -> None:
    assert [format_params(v) for v in (70e6, 1.4e9, 7e9, 12e9, 950.0, None)] == [
        "70M",
        "1.4B",
        "7B",
        "12B",
        "950",
        None,
    ]


def test_discover_and_metadata_from_yaml_and_manifest(built: Built) -> None:
    runs = load_runs([built.root], load_meta_file(built.meta_yaml))
    assert len(runs) == len(MODELS) + len(LX_MODELS) * len(LX_LANGS) + 1
    by_dir = {r.path.resolve(): r for r in runs}
    for model, (family, params, category, alignment, _, _) in MODELS.items():
        r = by_dir[built.rtp[model].resolve()]
        assert r.model == model
        assert r.prompt_set == "RTP"
        assert r.meta == ModelMeta(
            family=family, params=parse_params(params), category=category, alignment=alignment
        )
        assert r.default_scorer is not None and r.default_scorer.startswith("svm")
        assert sorted(s.split("_")[0] for s in r.scorer_ids) == ["fake", "svm"]
    # The manifest's model_meta reaches the model's other runs (metadata describes the model).
    for lang in LX_LANGS:
        r = by_dir[built.rtplx[(MANIFEST_META_MODEL, lang)].resolve()]
        assert r.prompt_set == "RTP-LX"
        assert r.meta.family == MODELS[MANIFEST_META_MODEL][0]
        assert r.meta.params == parse_params(MODELS[MANIFEST_META_MODEL][1])
    # Without the YAML only the manifest metadata is known.
    bare = {r.model: r.meta for r in load_runs([built.root])}
    assert bare[MANIFEST_META_MODEL].category == "base"
    assert bare["pythia-70m"] == ModelMeta()


def test_run_ids_are_unique_and_dirs_deduplicated(built: Built) -> None:
    dirs = discover([built.root, built.rtp["pythia-70m"], built.root / "rtp"])
    assert len(dirs) == len({d.resolve() for d in dirs})
    runs = load_runs([built.root])
    assert len({r.run_id for r in runs}) == len(runs)


def test_yaml_run_override_relabels_a_run(built: Built, tmp_path: Path) -> None:
    meta = tmp_path / "m.yaml"
    meta.write_text(
        "runs:\n  pythia-70m-de:\n    prompt_set: PTP-like\n    model: renamed\n    family: other\n"
    )
    runs = {r.path.name: r for r in load_runs([built.root / "rtplx"], load_meta_file(meta))}
    assert runs["pythia-70m-de"].prompt_set == "PTP-like"
    assert runs["pythia-70m-de"].model == "renamed"
    assert runs["pythia-70m-de"].meta.family == "other"
    assert runs["pythia-70m-en"].prompt_set == "RTP-LX"


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "models:\n  a:\n    family: x\n  b:\n    category: chat\n",
            r"m\.yaml:4: models\.b\.category: 'chat' is not one",
        ),
        ("models:\n  a:\n    params: lots\n", r"m\.yaml:2: models\.a\.params: not a parameter count"),
        ("models:\n  a:\n    size: 7b\n", r"m\.yaml:2: models\.a: unknown field\(s\) size"),
        ("models: [1, 2]\n", r"m\.yaml:1: 'models' must be a mapping"),
        ("something: 1\n", r"expected a mapping with 'models'"),
        ("models:\n  a: {family: [\n", r"invalid YAML"),
    ],
)
def test_bad_metadata_yaml_names_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    meta = tmp_path / "m.yaml"
    meta.write_text(text)
    with pytest.raises(PolytoxError, match=message):
        load_meta_file(meta)


def test_missing_inputs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(PolytoxError, match="no such run directory"):
        load_runs([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolytoxError, match="contains none"):
        load_runs([tmp_path / "empty"])
    with pytest.raises(PolytoxError, match="metadata file not found"):
        load_meta_file(tmp_path / "missing.yaml")


def test_conflicting_manifest_metadata_is_an_error(built: Built, tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    shutil.copytree(built.rtp["pythia-70m"], a)
    shutil.copytree(built.rtplx[("pythia-70m", "de")], b)
    RunStore(a).update_manifest(model_meta={"family": "pythia", "params": "70m"})
    RunStore(b).update_manifest(model_meta={"family": "pythia", "params": "160m"})
    with pytest.raises(PolytoxError, match="runs disagree on params"):
        load_runs([tmp_path])
    meta = tmp_path / "m.yaml"
    meta.write_text("models:\n  pythia-70m: {params: 70m}\n")  # the YAML settles it
    runs = load_runs([a, b], load_meta_file(meta))
    assert {r.meta.params for r in runs} == {70e6}
    bad = json.loads((a / "manifest.json").read_text())
    bad["model_meta"] = {"category": "chat"}
    write_manifest_file(a / "manifest.json", bad)  # an edit on purpose: its checksum recorded anew
    with pytest.raises(PolytoxError, match=r"manifest\.json: model_meta\.category"):
        load_runs([a])
