"""Can the default scorer run faster at today's values? ``polytox-ml`` (full) against its candidates, side by side.

The candidates of issue 64, item 1 (research/scorer/log.md, "A faster default scorer"), each a way of running
the same float32 backbone and head:

- ``mkl``: the float32 default as it was until oneDNN took its linear layers: every matmul through MKL's
  sgemm (the reference: speedups and score differences are against it);
- ``today``: the shipped default (float32, eager, SDPA attention, the blocks' linear layers through oneDNN's
  float32 kernel, ``polytox._util.onednn``);
- ``compile``: each decoder block read (layers 1 to the deepest asked) through ``torch.compile``, on the
  ``mkl`` path (dynamo does not trace oneDNN's linear op);
- ``onednn``: ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``, meant to round matmul inputs to
  bfloat16 inside oneDNN; on a CPU without AMX it still computes in float32, with oneDNN's kernel in place
  of MKL's (values move at float32's last bits);
- ``compile+onednn``: both;
- ``bf16-linear``: every linear layer of the blocks read in bfloat16 (weights and inputs rounded, float32
  accumulation inside oneDNN, outputs rounded to bfloat16 and widened back), norms, attention and the
  residual stream in float32;
- ``int8``: the read blocks' linear layers through ``quantize_dynamic`` (int8 weights, per-row activations);
- ``onnx``: the blocks read exported to ONNX (``torch.onnx.export``, dynamic batch and length) and run by
  ONNX Runtime's CPU provider in float32, one session per thread count (only where ``onnxruntime``,
  ``onnx`` and ``onnxscript`` import; not a polytox dependency);
- ``bf16``: the whole backbone in bfloat16 (``dtype=bfloat16``), the speed target.

All are timed in one process, interleaved (mkl, today, compile, ..., mkl, today, ...; ``--rounds`` rounds,
medians), on ``bench_scorer_bf16.py``'s two labelled sets. Per set and candidate: texts/s, speedup over
``mkl``, max |score diff| against ``mkl``, AUC and its change. Then one-value-per-text: texts of mixed
lengths and languages scored alone, in two different batches (one reversed) and with 1 thread; the largest
difference from "alone". And the share of the hardware used: FLOPs of the blocks read per token (padding
included) against a float32 matmul of the same shapes timed in the same run. The machine may be shared:
the rates carry others' load, the interleaving keeps the ratios fair. Usage:
Caveat: with ``onnx`` and a torch-run candidate in one process, ONNX Runtime's thread pool and torch's
OpenMP threads fight over the cores (ORT's idle spinning is switched off, yet a run with ``compile`` and
``onnx`` together slowed every candidate 5-10x); time ``onnx`` against ``mkl`` alone (``--only mkl,onnx``).
python benchmarks/bench_scorer_speed.py [--n 200] [--rounds 3] [--threads 2] [--only mkl,today,bf16]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scorer_bf16 import labelled_sets
from polytox._util.onednn import restore_linears
from polytox.scoring.ml.scorer import PolytoxMlScorer


@contextlib.contextmanager
def _plain() -> Iterator[None]:
    yield


@contextlib.contextmanager
def _onednn() -> Iterator[None]:
    before = torch.backends.mkldnn.matmul.fp32_precision
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    try:
        yield
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = before


def _mkl(scorer: PolytoxMlScorer) -> PolytoxMlScorer:
    """The blocks' linear layers back on torch's own path (MKL's sgemm for float32 on CPU)."""
    blocks, deepest = _read_blocks(scorer)
    for block in list(blocks)[:deepest]:
        restore_linears(block)
    return scorer


def _read_blocks(scorer: PolytoxMlScorer) -> tuple[Any, int]:
    """The loaded embedder's decoder blocks and how many of them a pass runs (the deepest layer read)."""
    embedder = scorer._embedder
    assert embedder is not None
    embedder._load()
    return embedder._blocks, max(embedder.layers)


def _compiled(scorer: PolytoxMlScorer) -> PolytoxMlScorer:
    blocks, deepest = _read_blocks(scorer)
    for block in list(blocks)[:deepest]:  # the hooks stay outside the compiled forward
        block.forward = torch.compile(block.forward, dynamic=True)
    return scorer


class _Bf16Linear(torch.nn.Module):
    """A linear layer computed in bfloat16 between float32 activations."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        self.bias = None if linear.bias is None else torch.nn.Parameter(linear.bias.detach().to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)


def _bf16_linear(scorer: PolytoxMlScorer) -> PolytoxMlScorer:
    blocks, deepest = _read_blocks(scorer)
    for block in list(blocks)[:deepest]:
        for owner in list(block.modules()):
            for name, child in list(owner.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(owner, name, _Bf16Linear(child))
    return scorer


class _Trunk(torch.nn.Module):
    """The backbone cut after the deepest layer read, without its final norm: the asked layers' states."""

    def __init__(self, lm: Any, layers: tuple[int, ...]) -> None:
        super().__init__()
        self.lm = copy.deepcopy(lm)
        deepest = max(layers)
        self.lm.layers = torch.nn.ModuleList(list(self.lm.layers)[:deepest])
        self.lm.config.num_hidden_layers = deepest
        self.lm.config.layer_types = self.lm.config.layer_types[:deepest]
        self.lm.norm = torch.nn.Identity()  # hidden_states[-1] is normed by the model: not here
        self.layers = layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, output_hidden_states=True)
        return tuple(out.hidden_states[layer] for layer in self.layers)


def _onnx(scorer: PolytoxMlScorer) -> PolytoxMlScorer:
    import onnxruntime as ort  # optional: only this candidate needs it

    embedder = scorer._embedder
    assert embedder is not None
    embedder._load()
    path = Path(tempfile.mkdtemp(prefix="polytox-onnx-")) / "trunk.onnx"
    ids, lengths = embedder._tokenize(["Das Wetter ist heute schön.", "Tu es vraiment un imbécile."])
    matrix, mask = embedder._pad(ids, np.arange(2), lengths)
    batch, width = torch.export.Dim("batch", min=1, max=4096), torch.export.Dim("width", min=1, max=embedder.max_tokens)
    torch.onnx.export(
        _Trunk(embedder._lm, embedder.layers).eval(),
        (matrix, mask),
        str(path),
        dynamo=True,
        input_names=["input_ids", "attention_mask"],
        external_data=True,
        dynamic_shapes={"input_ids": {0: batch, 1: width}, "attention_mask": {0: batch, 1: width}},
    )
    sessions: dict[int, Any] = {}

    def run_layers(ids: torch.Tensor, mask: torch.Tensor, on_layer: Callable[[int, Any], None]) -> None:
        threads = torch.get_num_threads()
        if threads not in sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            # idle ORT threads spinning for work would take the cores from the torch passes between runs
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            sessions[threads] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        states = sessions[threads].run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        for layer, state in zip(embedder.layers, states, strict=True):
            on_layer(layer, torch.from_numpy(state))

    embedder._run_layers = run_layers  # type: ignore[method-assign]
    return scorer


def _int8(scorer: PolytoxMlScorer) -> PolytoxMlScorer:
    blocks, deepest = _read_blocks(scorer)
    for i in range(deepest):
        blocks[i] = torch.ao.quantization.quantize_dynamic(blocks[i], {torch.nn.Linear}, dtype=torch.qint8)
    return scorer


REFERENCE = "mkl"  # the float32 default as it was: speedups and differences are against it
CANDIDATES: dict[str, tuple[Callable[[], PolytoxMlScorer], Callable[[], contextlib.AbstractContextManager[None]]]] = {
    "mkl": (lambda: _mkl(PolytoxMlScorer()), _plain),
    "today": (PolytoxMlScorer, _plain),
    "compile": (lambda: _compiled(_mkl(PolytoxMlScorer())), _plain),
    "onednn": (lambda: _mkl(PolytoxMlScorer()), _onednn),
    "compile+onednn": (lambda: _compiled(_mkl(PolytoxMlScorer())), _onednn),
    "bf16-linear": (lambda: _bf16_linear(PolytoxMlScorer()), _plain),
    "int8": (lambda: _int8(_mkl(PolytoxMlScorer())), _plain),
    "onnx": (lambda: _onnx(_mkl(PolytoxMlScorer())), _plain),
    "bf16": (lambda: PolytoxMlScorer(dtype="bfloat16"), _plain),
}


def score(candidate: tuple[PolytoxMlScorer, Callable[[], Any]], texts: list[str], langs: list[str]) -> np.ndarray:
    scorer, context = candidate
    with context():
        return np.array([s.values["toxicity"] for s in scorer.score_batch(texts, langs)])


def invariance(
    candidate: tuple[PolytoxMlScorer, Callable[[], Any]],
    texts: list[str],
    langs: list[str],
    filler: tuple[list[str], list[str]],
) -> dict[str, float]:
    """Max |diff| from each text scored alone: in one batch, in a reversed batch padded with ``filler``
    texts, and alone with 1 torch thread."""
    alone = np.array([score(candidate, [t], [g])[0] for t, g in zip(texts, langs, strict=True)])
    together = score(candidate, texts, langs)
    mixed = score(candidate, texts[::-1] + filler[0], langs[::-1] + filler[1])[: len(texts)][::-1]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = np.array([score(candidate, [t], [g])[0] for t, g in zip(texts, langs, strict=True)])
    finally:
        torch.set_num_threads(threads)
    return {
        name: float(np.abs(v - alone).max())
        for name, v in (("one batch", together), ("other batch", mixed), ("1 thread", single))
    }


def timed(
    candidates: dict[str, tuple[PolytoxMlScorer, Callable[[], Any]]],
    names: list[str],
    texts: list[str],
    langs: list[str],
    rounds: int,
    chunk: int,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Seconds per candidate for all ``texts`` (sum over calls of ``chunk`` texts of each call's median over
    ``rounds``) and each candidate's paired speedups (the reference's time / its time, same call, same round). The
    candidates take turns on each call, the first one rotating, so a burst of load from other jobs falls
    on neighbours in time and a slow drift cancels in the ratios."""
    starts = range(0, len(texts), chunk)
    times = {name: np.zeros((rounds, len(starts))) for name in names}
    for r in range(rounds):
        for c, start in enumerate(starts):
            part, part_langs = texts[start : start + chunk], langs[start : start + chunk]
            turn = (r + c) % len(names)
            for name in names[turn:] + names[:turn]:
                began = time.perf_counter()
                score(candidates[name], part, part_langs)
                times[name][r, c] = time.perf_counter() - began
    seconds = {name: float(np.median(t, axis=0).sum()) for name, t in times.items()}
    return seconds, {name: (times[REFERENCE] / t).ravel() for name, t in times.items()}


def padded_tokens(embedder: Any, texts: list[str], chunk: int) -> int:
    """Token positions the timed calls run through the blocks: each call's texts sorted by length and cut
    into batches of ``batch_size``, each padded to its longest."""
    lengths = embedder._tokenize(texts)[1]
    total, size = 0, embedder.batch_size
    for start in range(0, len(lengths), chunk):
        order = np.sort(lengths[start : start + chunk])
        total += sum(len(order[i : i + size]) * int(order[i : i + size].max()) for i in range(0, len(order), size))
    return total


def block_flops(scorer: PolytoxMlScorer) -> float:
    """Multiply-add FLOPs per token of the blocks a pass runs (linear layers; attention's own products,
    under 3% at these lengths, left out)."""
    blocks, deepest = _read_blocks(scorer)
    return float(
        sum(
            2 * m.in_features * m.out_features
            for b in list(blocks)[:deepest]
            for m in b.modules()
            if isinstance(m, torch.nn.Linear)
        )
    )


def gemm_peak(tokens: int = 1024, repeats: int = 20) -> tuple[float, float]:
    """float32 FLOP/s of the MLP's up-projection shape (tokens x 640 @ 640 x 2048), best of ``repeats``:
    through torch's matmul (MKL's sgemm) and through oneDNN's float32 linear kernel. The larger is the
    hardware limit the table's share is measured against."""
    a, b = torch.randn(tokens, 640), torch.randn(640, 2048)
    weight = b.t().contiguous()

    def best(run: Callable[[], Any]) -> float:
        fastest = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            run()
            fastest = min(fastest, time.perf_counter() - started)
        return 2 * tokens * 640 * 2048 / fastest

    with torch.inference_mode():
        mkl = best(lambda: a @ b)
        onednn = best(lambda: torch.ops.mkldnn._linear_pointwise(a, weight, None, "none", [], ""))
    return mkl, onednn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=50, help="texts per timed call")
    parser.add_argument("--only", default=",".join(CANDIDATES), help="comma list, mkl (the reference) first")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = args.only.split(",")
    sets = labelled_sets(args.n, args.seed)
    candidates, setup = {}, {}
    for name in names:
        started = time.perf_counter()
        build, context = CANDIDATES[name]
        candidates[name] = (build(), context)
        for texts, langs, _ in sets.values():  # load, compile and warm on every set's shapes, outside the timing
            score(candidates[name], texts, langs)
        setup[name] = time.perf_counter() - started
    console = Console(width=170)
    flops = block_flops(candidates[REFERENCE][0])
    mkl_peak, onednn_peak = gemm_peak()
    peak = max(mkl_peak, onednn_peak)
    table = Table(
        title=f"polytox-ml (full), candidates interleaved per {args.chunk}-text call, {args.rounds} rounds "
        f"(texts/s: sum of per-call medians; speedup: median of paired ratios to mkl); "
        f"{args.n} texts per set; torch threads {torch.get_num_threads()}; "
        f"float32 GEMM peak {peak / 1e9:.0f} GFLOP/s (MKL {mkl_peak / 1e9:.0f}, oneDNN {onednn_peak / 1e9:.0f})"
    )
    for col in (
        "set",
        "candidate",
        "texts/s",
        "speedup (25-75%)",
        "max |score diff|",
        "AUC",
        "AUC change",
        "share of fp32 GEMM peak",
        "setup s",
    ):
        table.add_column(col, justify="left" if col in ("set", "candidate") else "right")
    embedder = candidates[REFERENCE][0]._embedder
    assert embedder is not None
    for set_name, (texts, langs, labels) in sets.items():
        values = {name: score(candidates[name], texts, langs) for name in names}
        seconds, speedup = timed(candidates, names, texts, langs, args.rounds, args.chunk)
        print(f"timed {set_name}", file=sys.stderr, flush=True)
        padded = padded_tokens(embedder, texts, args.chunk)
        auc0 = roc_auc_score(labels, values[REFERENCE])
        for name in names:
            rate = len(texts) / seconds[name]
            auc = roc_auc_score(labels, values[name])
            share = padded * flops / seconds[name] / peak
            low, mid, high = np.percentile(speedup[name], [25, 50, 75])
            table.add_row(
                set_name,
                name,
                f"{rate:.1f}",
                f"{mid:.2f}x ({low:.2f}-{high:.2f})",
                f"{np.abs(values[name] - values[REFERENCE]).max():.2e}",
                f"{auc:.4f}",
                f"{auc - auc0:+.4f}",
                f"{share:.0%}",
                f"{setup[name]:.0f}",
            )
    console.print(table)
    lx_texts, lx_langs, _ = sets["RTP-LX, 17 languages (human >= 3)"]
    en_texts, en_langs, _ = sets["en continuations (Perspective >= 0.5)"]
    probe = (lx_texts[:8] + en_texts[:4], lx_langs[:8] + en_langs[:4])
    filler = (lx_texts[8:40], lx_langs[8:40])
    inv = Table(title="one value per text: max |diff| from the text scored alone (12 texts, 8 RTP-LX + 4 English)")
    for col in ("candidate", "one batch", "other batch", "1 thread"):
        inv.add_column(col, justify="left" if col == "candidate" else "right")
    for name in names:
        found = invariance(candidates[name], *probe, filler)
        inv.add_row(name, *(f"{v:.2e}" if v else "0 (identical)" for v in found.values()))
    console.print(inv)


if __name__ == "__main__":
    main()
