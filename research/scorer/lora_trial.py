"""Does fine-tuning the backbone buy anything beside the attention probe? A decision experiment.

Before the probe existed, a LoRA fine-tune of gemma-3-270m added about +0.01 of human AUC to a ridge on
mean pools (docs/trainscorer.md, "Backbone features tried"). The probe then added +0.018 to the same
reading, so the two may buy the same thing. This trial measures it out of fold, on a bundle
(``lora_bundle``) so that the fine-tune can run where a GPU is:

1. ``pack``: write the task's bundle (rows, folds, targets, weights, n-gram out-of-fold scores, the
   backbone's exact lower blocks);
2. ``run`` (any device; a GPU takes minutes): first the untuned backbone's token states, checked against
   the CPU pools in the bundle; then per fold, the untuned reading (the probe with the task's penalties
   and a ridge on the mean pools, both fitted on the other folds), a LoRA fine-tune on the other folds
   (``LORA`` below: every projection of the blocks read, a linear head on the standardised mean pool of the
   deepest layer, weighted squared error on the task's target) and the same reading of the tuned
   backbone. Out-of-fold scores go to ``oof.npz``, written after every fold;
3. ``read``: each reading alone and beside the n-gram ridge (a pooled logistic combiner on the labels, as
   ``attention_trial`` combines them), per language against the labels, with the paired group bootstrap
   difference from "n-grams + untuned probe" and the verdict of the rule in docs/trainscorer.md ("LoRA
   beside the attention probe"). For ``english`` it reads AUC against Perspective >= 0.5, Pearson r and
   the monotone MAE floor (``measure.mae_floor``) of web text and model generations.

The held-out split is never read.

    python -m research.scorer.lora_trial pack --task rtp-lx --out .gpu/lora
    python -m research.scorer.lora_trial run --bundle .gpu/lora --out /tmp/lora-out
    python -m research.scorer.lora_trial read --bundle .gpu/lora --oof /tmp/lora-out/oof.npz \\
        --out research/scorer/results/trainscorer-lora.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polytox.errors import PolytoxError, require
from polytox.scoring.ml.attention import fit_attention_probe, fit_ridge, mean_pools
from polytox.scoring.ml.embedder import decoder_layers, keep_weight, run_layers
from polytox.training.scorer.attention_fit import take
from research.scorer.lora_bundle import FLOAT, TASKS

# The fine-tune (docs/trainscorer.md, "LoRA beside the attention probe"; the earlier LoRA reading's settings)
LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.05,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
EPOCHS = 2
TRAIN_BATCH = 32
LR_LORA = 2e-4
LR_HEAD = 1e-3
READ_BATCH = 256
RIDGE_ALPHA = 10_000.0  # the mean-pool ridge of the attention trial's best row
READINGS = ("base_probe", "base_ridge", "lora_head", "lora_probe", "lora_ridge")
# The rule (written before the run)
MIN_GAIN = 0.010
MIN_WEB_FLOOR_DROP = 0.010


class Backbone:
    """The bundle's backbone (its lower blocks, on the pruned vocabulary), fresh copies on ``device``."""

    def __init__(self, bundle: Path, device: str) -> None:
        quants = require("gguf.quants", "hf")
        gguf = require("gguf", "hf")
        torch = require("torch", "hf")
        self.bundle, self.device = bundle, device
        self.config = json.loads((bundle / "config.json").read_text())
        self.task = json.loads((bundle / "task.json").read_text())
        self.layers = tuple(self.task["layers"])
        meta = json.loads((bundle / "weights.json").read_text())
        stored = np.load(bundle / "weights.npz")
        self.state: dict[str, Any] = {}
        for name, m in meta.items():
            raw = stored[m["key"]]
            value = raw if m["type"] == FLOAT else quants.dequantize(raw, gguf.GGMLQuantizationType(m["type"]))
            self.state[name.removeprefix("model.")] = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))

    def fresh(self) -> Any:
        transformers = require("transformers", "hf")
        config = transformers.AutoConfig.for_model(
            **{k: v for k, v in self.config.items() if not k.startswith("_") and k != "model_type"},
            model_type=self.config["model_type"])
        model = transformers.AutoModel.from_config(config)
        missing, unexpected = model.load_state_dict(self.state, strict=False)
        if unexpected or any(not (k.startswith("norm") or "rotary" in k) for k in missing):
            raise PolytoxError(f"the bundle does not fit the backbone: missing {missing}, unexpected {unexpected}")
        return model.to(self.device).float()


class Tokens:
    """The bundle's token ids, cut into right-padded batches."""

    def __init__(self, data: Any, device: str) -> None:
        self.ids, self.offsets = data["ids"], data["offsets"]
        self.bos, self.pad = int(data["bos"]), int(data["pad"])
        self.device = device

    def batches(self, rows: np.ndarray, size: int, sort: bool = True) -> Iterator[tuple[np.ndarray, Any, Any, Any]]:
        """(rows, ids, mask, keep) per batch; ``keep`` is 1 where a pool reads (no padding, no leading BOS)."""
        torch = require("torch", "hf")
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        order = rows[np.argsort(lengths, kind="stable")] if sort else rows
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            n = self.offsets[batch + 1] - self.offsets[batch]
            mask = np.arange(int(n.max()))[None, :] < n[:, None]
            matrix = np.full(mask.shape, self.pad, dtype=np.int64)
            matrix[mask] = np.concatenate([self.ids[self.offsets[i] : self.offsets[i + 1]] for i in batch])
            ids = torch.from_numpy(matrix).to(self.device)
            mask_t = torch.from_numpy(mask.astype(np.int64)).to(self.device)
            yield batch, ids, mask_t, keep_weight(ids, mask_t, self.bos)


def layer_outputs(model: Any, layers: Sequence[int], ids: Any, mask: Any) -> dict[int, Any]:
    """The asked layers' outputs of one batch, read as ``HiddenStateEmbedder`` reads them
    (``embedder.run_layers``), with gradients where the caller's mode has them (the fine-tune)."""
    got: dict[int, Any] = {}
    run_layers(model, decoder_layers(model), layers, ids, mask, got.__setitem__)
    return got


def token_states(model: Any, tokens: Tokens, layers: Sequence[int], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, len(layers) * hidden) float16 states of ``rows`` in that order, and offsets, as
    ``HiddenStateEmbedder.token_states`` gives them."""
    torch = require("torch", "hf")
    model.eval()
    chunks: list[np.ndarray] = [np.zeros(0)] * len(rows)
    where = {int(r): k for k, r in enumerate(rows)}
    with torch.inference_mode():
        for batch, ids, mask, keep in tokens.batches(rows, READ_BATCH):
            got = layer_outputs(model, layers, ids, mask)
            states = torch.cat([got[layer].float() for layer in layers], dim=-1).clamp(-65000, 65000)
            states_np = states.half().cpu().numpy()
            keep_np = keep.bool().cpu().numpy()
            for j, row in enumerate(batch):
                chunks[where[int(row)]] = states_np[j][keep_np[j]]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in chunks])]).astype(np.int64)
    return np.concatenate(chunks), offsets


def read_states(states: np.ndarray, offsets: np.ndarray, pools: np.ndarray, fit: np.ndarray, test: np.ndarray,
                target: np.ndarray, weight: np.ndarray, penalties: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The probe (on the token states) and the ridge on their mean pools (``pools``, one row per text),
    fitted on ``fit``, scored on ``test``."""
    probe = fit_attention_probe(*take(states, offsets, fit), target, penalties[0], penalties[1], weight=weight)
    mean, scale = pools[fit].mean(axis=0), pools[fit].std(axis=0)
    scale[scale < 1e-6] = 1.0
    coef, intercept = fit_ridge((pools[fit] - mean) / scale, target, RIDGE_ALPHA, weight)
    return probe.score(*take(states, offsets, test)), ((pools[test] - mean) / scale) @ coef + intercept


def fine_tune(backbone: Backbone, tokens: Tokens, pools: np.ndarray, fit: np.ndarray, target: np.ndarray,
              weight: np.ndarray, seed: int, epochs: int, max_steps: int | None = None) -> tuple[Any, Any, Any, dict]:
    """LoRA on a fresh backbone with a linear head on the standardised mean pool of the deepest layer,
    weighted squared error. Returns the tuned model, the head, the standardisation and a log."""
    torch = require("torch", "hf")
    peft = require("peft", "detox")
    device = backbone.device
    hidden = int(backbone.config["hidden_size"])
    deepest = pools[:, -hidden:]
    mean = torch.tensor(deepest[fit].mean(axis=0), device=device)
    scale = torch.tensor(deepest[fit].std(axis=0).clip(1e-6), device=device)
    torch.manual_seed(seed)
    model = peft.get_peft_model(backbone.fresh(), peft.LoraConfig(**LORA))
    head = torch.nn.Linear(hidden, 1).to(device)
    opt = torch.optim.AdamW([{"params": [p for p in model.parameters() if p.requires_grad], "lr": LR_LORA},
                             {"params": head.parameters(), "lr": LR_HEAD}], weight_decay=0.01)
    goal = {int(r): (float(t), float(w)) for r, t, w in zip(fit, target, weight, strict=True)}
    rng = np.random.default_rng(seed)
    steps, losses = 0, []
    model.train()
    for _ in range(epochs):
        for batch, ids, mask, keep in tokens.batches(rng.permutation(fit), TRAIN_BATCH, sort=False):
            if max_steps is not None and steps >= max_steps:
                break
            with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                got = layer_outputs(model, backbone.layers, ids, mask)
            w = keep.unsqueeze(-1)
            pool = (got[max(backbone.layers)].float() * w).sum(1) / w.sum(1).clamp(min=1.0)
            pred = head((pool - mean) / scale).squeeze(-1)
            y = torch.tensor([goal[int(i)][0] for i in batch], device=device)
            wt = torch.tensor([goal[int(i)][1] for i in batch], device=device)
            loss = (wt * (pred - y) ** 2).sum() / wt.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            losses.append(float(loss.detach()))
    return model, head, (mean, scale), {"steps": steps, "loss_first": losses[0] if losses else None,
                                        "loss_last_50": float(np.mean(losses[-50:])) if losses else None}


def run(bundle: Path, out: Path, epochs: int = EPOCHS, max_steps: int | None = None,
        rows_limit: int | None = None) -> dict[str, Any]:
    """Every fold of the bundle's task; ``oof.npz`` and ``log.json`` in ``out`` after each fold.
    ``max_steps`` / ``rows_limit`` shrink the run (tests)."""
    torch = require("torch", "hf")
    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    out.mkdir(parents=True, exist_ok=True)
    data = np.load(bundle / "data.npz")
    backbone = Backbone(bundle, device)
    tokens = Tokens(data, device)
    n = len(data["offsets"]) - 1
    rows = np.arange(n if rows_limit is None else min(rows_limit, n))  # a prefix: positions are row ids
    fold, targets, weights = data["fold"][rows], data["targets"], data["weights"]
    log: dict[str, Any] = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                           "torch": torch.__version__, "task": backbone.task, "epochs": epochs, "folds": []}
    states, offsets = token_states(backbone.fresh(), tokens, backbone.layers, rows)
    pools = mean_pools(states, offsets)
    checked = np.array([c for c in data["check"] if c < len(rows)])
    if len(checked):
        mine = pools[checked]
        reference = data["check_pools"][: len(checked)]
        log["check_pools_max_rel"] = float(np.abs(mine - reference).max() / np.abs(reference).max())
        if log["check_pools_max_rel"] > 1e-3:
            raise PolytoxError(f"the bundle's backbone does not reproduce the CPU pools "
                               f"(max relative difference {log['check_pools_max_rel']:.2e})")
    scores = {name: np.full(n, np.nan) for name in READINGS}
    penalties = backbone.task["penalties"]
    for k in backbone.task["folds"]:
        fit, test = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        if not len(test):
            continue
        target, weight = targets[k, fit], weights[fit]
        scores["base_probe"][test], scores["base_ridge"][test] = read_states(states, offsets, pools, fit, test,
                                                                             target, weight, penalties)
        model, head, (mean, scale), tuned = fine_tune(backbone, tokens, pools, fit, target, weight, seed=k,
                                                      epochs=epochs, max_steps=max_steps)
        tuned_states, tuned_offsets = token_states(model, tokens, backbone.layers, rows)
        tuned_pools = mean_pools(tuned_states, tuned_offsets)
        hidden = int(backbone.config["hidden_size"])
        with torch.inference_mode():
            deepest = torch.tensor(tuned_pools[test][:, -hidden:], device=device)
            scores["lora_head"][test] = head((deepest - mean) / scale).squeeze(-1).float().cpu().numpy()
        scores["lora_probe"][test], scores["lora_ridge"][test] = read_states(
            tuned_states, tuned_offsets, tuned_pools, fit, test, target, weight, penalties)
        log["folds"].append({"fold": int(k), **tuned, "seconds": round(time.time() - started, 1)})
        print(f"fold {k}: {tuned} ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
        np.savez(out / "oof.npz", allow_pickle=False, **scores)
        (out / "log.json").write_text(json.dumps(log, indent=1))
    log["seconds"] = round(time.time() - started, 1)
    np.savez(out / "oof.npz", allow_pickle=False, **scores)
    (out / "log.json").write_text(json.dumps(log, indent=1))
    return log


def read(bundle: Path, oof: Path) -> dict[str, Any]:
    """Every reading, alone and beside the n-gram ridge, and the rule's verdict."""
    linear = require("sklearn.linear_model", "ml")
    from polytox.training.scorer.measure import auc, mae_floor
    from research.scorer.attention_trial import language_aucs
    from research.scorer.combiner_trial import mean_auc_difference

    data = np.load(bundle / "data.npz")
    scores = np.load(oof)
    tested = np.isfinite(scores["base_probe"])
    labels, langs, groups = data["labels"][tested], data["langs"][tested], data["groups"][tested]
    ngram = data["ngram"][tested]
    english = bool(np.isfinite(data["reference"]).any())
    combined: dict[str, np.ndarray] = {}
    for name in READINGS:
        inputs = np.column_stack([ngram, scores[name][tested]])
        if english:  # on Perspective's scale: a linear map of the two onto the score itself
            combined[name] = linear.LinearRegression().fit(inputs, data["reference"][tested]).predict(inputs)
        else:
            combiner = linear.LogisticRegression(C=100.0, max_iter=1000).fit(inputs, labels)
            combined[name] = combiner.decision_function(inputs)
    readings = {name: scores[name][tested] for name in READINGS}
    readings["ngram"] = ngram
    readings.update({f"n-grams + {name}": values for name, values in combined.items()})
    result: dict[str, Any] = {"rows": int(tested.sum()), "english": english}
    if english:
        reference, kinds = data["reference"][tested], data["kinds"][tested]
        present = [kind for kind in ("web", "generation") if (kinds == kind).sum() >= 2]

        def agreement(v: np.ndarray, m: np.ndarray) -> dict[str, Any]:
            return {"n": int(m.sum()), "auc": auc(labels[m], v[m]),
                    "r": float(np.corrcoef(v[m], reference[m])[0, 1]), "mae_floor": mae_floor(v[m], reference[m])}

        result["readings"] = {name: {kind: agreement(v, kinds == kind) for kind in present}
                              for name, v in readings.items()}
        base, tuned = (result["readings"][f"n-grams + {n}"]["web"]["mae_floor"] for n in ("base_probe", "lora_probe"))
        result["verdict"] = {"web_floor_drop": round(base - tuned, 4), "go": base - tuned >= MIN_WEB_FLOOR_DROP}
    else:
        result["readings"] = {name: language_aucs(labels, v, langs) for name, v in readings.items()}
        result["vs_untuned"] = {name: mean_auc_difference(labels, langs, groups, combined[name], combined["base_probe"])
                                for name in READINGS if name != "base_probe"}
        gain = result["vs_untuned"]["lora_probe"]
        result["verdict"] = {"gain": gain["diff"], "ci": gain["ci"],
                             "go": gain["diff"] >= MIN_GAIN and gain["ci"][0] > 0}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    packing = sub.add_parser("pack", help="write a task's bundle")
    packing.add_argument("--task", choices=TASKS, required=True)
    packing.add_argument("--out", type=Path, required=True)
    packing.add_argument("--folds", default="0,1,2,3,4", help="the folds the run fine-tunes (comma-separated)")
    packing.add_argument("--shared", default="../shared/data")
    running = sub.add_parser("run", help="fine-tune and read every fold of a bundle (a GPU if there is one)")
    running.add_argument("--bundle", type=Path, required=True)
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--epochs", type=int, default=EPOCHS)
    reading = sub.add_parser("read", help="AUCs, intervals and the verdict of a run")
    reading.add_argument("--bundle", type=Path, required=True)
    reading.add_argument("--oof", type=Path, required=True)
    reading.add_argument("--out", type=Path, help="write the result here (JSON)")
    args = p.parse_args(argv)
    if args.verb == "pack":
        from polytox.training.scorer.train import TrainConfig
        from research.scorer.lora_bundle import pack

        folds = tuple(int(f) for f in args.folds.split(","))
        print(json.dumps(pack(TrainConfig(shared=args.shared), args.task, args.out, folds), indent=1))
    elif args.verb == "run":
        print(json.dumps(run(args.bundle, args.out, args.epochs), indent=1))
    else:
        result = read(args.bundle, args.oof)
        if args.out:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result.get("verdict"), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
