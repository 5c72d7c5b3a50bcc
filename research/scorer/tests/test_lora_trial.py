"""lora_trial / lora_bundle: the LoRA decision experiment on a tiny random gemma3, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")
gguf = pytest.importorskip("gguf")
pytest.importorskip("sklearn")

from polytox.errors import PolytoxError  # noqa: E402
from polytox.scoring.ml.attention import mean_pools  # noqa: E402
from polytox.training.scorer.attention_fit import take  # noqa: E402
from research.scorer.lora_bundle import FLOAT, GGUF_NAMES, quantised_weights  # noqa: E402
from research.scorer.lora_trial import Backbone, Tokens, read, run, token_states  # noqa: E402

LAYERS = [1, 2, 3]
VOCAB = 40
N = 120


def tiny_config() -> Any:
    return transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, max_position_embeddings=64, sliding_window=16, pad_token_id=0,
        bos_token_id=2, eos_token_id=1, layer_types=["sliding_attention", "sliding_attention", "full_attention"])


def write_bundle(folder: Path, *, labels_from_tokens: bool = True) -> Any:
    """A bundle of a random tiny gemma3 (every weight stored as float32) and N random texts in 2 folds,
    whose label is whether token 7 occurs, so a reading can learn it."""
    torch.manual_seed(0)
    model = transformers.Gemma3TextModel(tiny_config()).float().eval()
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 12, N)
    texts = [np.concatenate([[2], rng.integers(4, VOCAB, n - 1)]) for n in lengths]
    labels = np.array([7 in t for t in texts]) if labels_from_tokens else rng.random(N) < 0.5
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    fold = np.arange(N) % 2
    targets = np.tile(labels.astype(float), (5, 1))
    data = {"ids": np.concatenate(texts).astype(np.int32), "offsets": offsets, "fold": fold, "targets": targets,
            "weights": np.ones(N), "labels": labels, "langs": np.array(["de", "cs"] * (N // 2)),
            "kinds": np.array(["rtp-lx"] * N), "reference": np.full(N, np.nan),
            "groups": np.array([f"g{i // 2}" for i in range(N)]), "ngram": rng.normal(size=N) + labels,
            "check": np.arange(0, N, 10), "bos": np.array(2), "pad": np.array(0)}
    tokens = Tokens(data, "cpu")
    states, offs = token_states(model, tokens, LAYERS, np.arange(N))
    data["check_pools"] = mean_pools(*take(states, offs, data["check"])).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "data.npz", **data)
    state = {f"model.{k}": v.numpy() for k, v in model.state_dict().items() if "rotary" not in k and k != "norm.weight"}
    np.savez(folder / "weights.npz", **{k.replace(".", "__"): v for k, v in state.items()})
    (folder / "weights.json").write_text(json.dumps({k: {"type": FLOAT, "key": k.replace(".", "__")} for k in state}))
    (folder / "config.json").write_text(model.config.to_json_string())
    (folder / "task.json").write_text(json.dumps({"task": "rtp-lx", "layers": LAYERS, "penalties": [10.0, 10.0],
                                                  "folds": [0, 1]}))
    return model


def test_the_bundle_rebuilds_the_backbone_exactly(tmp_path: Path) -> None:
    model = write_bundle(tmp_path)
    rebuilt = Backbone(tmp_path, "cpu").fresh().eval()
    ids = torch.tensor([[2, 5, 9, 7, 11]])
    with torch.inference_mode():
        a = model(input_ids=ids, output_hidden_states=True).hidden_states[2]
        b = rebuilt(input_ids=ids, output_hidden_states=True).hidden_states[2]
    assert torch.equal(a, b)


def test_without_steps_the_tuned_reading_is_the_untuned_one(tmp_path: Path) -> None:
    write_bundle(tmp_path)
    log = run(tmp_path, tmp_path / "out", epochs=1, max_steps=0)
    scores = np.load(tmp_path / "out" / "oof.npz")
    assert [f["steps"] for f in log["folds"]] == [0, 0]
    assert log["check_pools_max_rel"] < 1e-5
    assert np.isfinite(scores["base_probe"]).all()
    np.testing.assert_array_equal(scores["lora_probe"], scores["base_probe"])  # LoRA starts as the identity
    np.testing.assert_array_equal(scores["lora_ridge"], scores["base_ridge"])
    result = read(tmp_path, tmp_path / "out" / "oof.npz")
    assert result["vs_untuned"]["lora_probe"]["diff"] == 0.0
    assert result["verdict"]["go"] is False
    assert result["readings"]["n-grams + base_probe"]["mean"] > result["readings"]["ngram"]["mean"]


def test_a_few_steps_move_the_tuned_reading(tmp_path: Path) -> None:
    write_bundle(tmp_path)
    log = run(tmp_path, tmp_path / "out", epochs=3, max_steps=12)
    scores = np.load(tmp_path / "out" / "oof.npz")
    assert [f["steps"] for f in log["folds"]] == [6, 6]  # 60 fit rows: 2 batches of at most 32, 3 epochs
    assert not np.array_equal(scores["lora_probe"], scores["base_probe"])
    assert all(np.isfinite(scores[name]).all() for name in scores.files)


def test_a_backbone_that_does_not_reproduce_the_cpu_pools_stops_the_run(tmp_path: Path) -> None:
    write_bundle(tmp_path)
    data = dict(np.load(tmp_path / "data.npz"))
    data["check_pools"] = data["check_pools"] * 1.01
    np.savez(tmp_path / "data.npz", **data)
    with pytest.raises(PolytoxError, match="does not reproduce the CPU pools"):
        run(tmp_path, tmp_path / "out", epochs=1, max_steps=0)


def write_gguf(folder: Path, perturb: str | None = None) -> tuple[Path, Path]:
    """A one-block GGUF (Q8_0 projections and embedding) and the converted model's safetensors of it."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    quants = gguf.quants
    rng = np.random.default_rng(1)
    writer = gguf.GGUFWriter(str(folder / "m.gguf"), "gemma3")
    stored: dict[str, np.ndarray] = {}

    def add(gguf_name: str, hf_name: str, shape: tuple[int, int]) -> None:
        value = rng.normal(size=shape).astype(np.float32)
        q = quants.quantize(value, gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(gguf_name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        stored[hf_name] = quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).astype(np.float32)

    add("token_embd.weight", "model.embed_tokens.weight", (16, 64))
    for short, long in GGUF_NAMES.items():
        add(f"blk.0.{short}.weight", f"model.layers.0.{long}.weight", (32, 64))
    for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm", "self_attn.q_norm", "self_attn.k_norm"):
        stored[f"model.layers.0.{norm}.weight"] = rng.normal(size=64).astype(np.float32)
    if perturb:
        stored[perturb] = stored[perturb].copy()
        stored[perturb][0, 0] += 1e-3
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    (folder / "model").mkdir()
    safetensors_numpy.save_file(stored, str(folder / "model" / "model.safetensors"))
    return folder / "model", folder / "m.gguf"


def test_packed_blocks_are_the_converted_weights_bit_for_bit(tmp_path: Path) -> None:
    model_dir, path = write_gguf(tmp_path)
    vocab = np.array([0, 3, 9])
    arrays, meta = quantised_weights(model_dir, path, 1, vocab)
    embed = meta["model.embed_tokens.weight"]
    assert embed["type"] == int(gguf.GGMLQuantizationType.Q8_0)
    assert arrays[embed["key"]].shape[0] == 3  # only the rows the texts use travel
    assert sum(m["type"] == FLOAT for m in meta.values()) == 6


def test_a_block_that_differs_from_the_converted_model_is_refused(tmp_path: Path) -> None:
    model_dir, path = write_gguf(tmp_path, perturb="model.layers.0.mlp.up_proj.weight")
    with pytest.raises(PolytoxError, match="ffn_up"):
        quantised_weights(model_dir, path, 1, np.array([0, 1]))
