"""Float32 linear layers through oneDNN's kernel (``polytox._util.onednn``): the same values as torch's own
path to float32's last bits, gradients and other dtypes left to torch, and the default scorer's backbone
routed through it on CPU."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from polytox._util.onednn import onednn_linear_works, use_onednn_linears  # noqa: E402

needs_onednn = pytest.mark.skipif(not onednn_linear_works(), reason="oneDNN's linear op is not available here")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 96),
        torch.nn.GELU(),
        torch.nn.Linear(96, 48, bias=False),
        torch.nn.LayerNorm(48),
        torch.nn.Linear(48, 8),
    ).eval()


@needs_onednn
def test_values_equal_torchs_path_to_float32_rounding() -> None:
    plain = _model()
    routed = copy.deepcopy(plain)
    assert use_onednn_linears(routed) == 3
    assert all(type(m).__name__ == "_OneDnnLinear" for m in routed.modules() if isinstance(m, torch.nn.Linear))
    x = torch.randn(5, 17, 64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ours, theirs = routed(x), plain(x)
        # a non-contiguous input (a transposed view) gives the same values as its contiguous copy
        view = torch.randn(64, 9, generator=torch.Generator().manual_seed(2)).t()
        assert torch.equal(routed(view), routed(view.contiguous()))
    assert ours.shape == theirs.shape == (5, 17, 8)
    assert float((ours - theirs).abs().max()) <= 1e-5 * float(theirs.abs().max())
    assert not torch.equal(ours, torch.zeros_like(ours))
    # the parameters are the same objects: a state dict saved from either loads into the other
    assert routed.state_dict().keys() == plain.state_dict().keys()


@needs_onednn
def test_one_value_per_row_whatever_the_batch() -> None:
    routed = _model()
    use_onednn_linears(routed)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        together = routed(x)
        alone = torch.cat([routed(x[i : i + 1]) for i in range(len(x))])
    assert float((together - alone).abs().max()) <= 1e-6


@needs_onednn
def test_gradients_and_other_dtypes_take_torchs_path() -> None:
    routed = _model()
    use_onednn_linears(routed)
    x = torch.randn(4, 64, requires_grad=True)
    routed(x).sum().backward()  # oneDNN's op has no backward: the layer falls back to F.linear
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
    half = copy.deepcopy(_model()).to(torch.bfloat16)
    assert use_onednn_linears(half) == 0  # bfloat16 layers are left alone
    with torch.inference_mode():
        assert routed(torch.randn(2, 64, dtype=torch.float64).float()).dtype == torch.float32


def test_nothing_changes_where_the_op_does_not_work(monkeypatch: pytest.MonkeyPatch) -> None:
    import polytox._util.onednn as onednn

    monkeypatch.setattr(onednn, "_WORKS", False)
    model = _model()
    assert use_onednn_linears(model) == 0
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))


@needs_onednn
def test_the_default_scorer_backbone_runs_through_onednn(tmp_path: Path) -> None:
    """The embedder routes the blocks it reads (and only those) on CPU in float32, and its pooled states
    equal torch's path to float32 rounding; bfloat16 keeps torch's path."""
    pytest.importorskip("transformers")
    from polytox.scoring.ml.embedder import HiddenStateEmbedder

    from .tiny_models import make_tiny_lm

    path = str(make_tiny_lm(tmp_path / "gemma3", arch="gemma3"))
    texts = ["a short one", "a somewhat longer text than the first", "x"]
    embedder = HiddenStateEmbedder(path, (1,))
    ours = embedder.embed(texts)
    blocks = list(embedder._blocks)
    linears = [[m for m in b.modules() if isinstance(m, torch.nn.Linear)] for b in blocks]
    assert {type(m).__name__ for m in linears[0]} == {"_OneDnnLinear"}
    assert all(type(m) is torch.nn.Linear for block in linears[1:] for m in block)
    for m in linears[0]:
        m.__class__ = torch.nn.Linear  # torch's own path, for the reference
    theirs = embedder.embed(texts)
    assert ours.shape == theirs.shape and float(np.abs(theirs).max()) > 0
    assert np.allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    bf16 = HiddenStateEmbedder(path, (1,), dtype="bfloat16")
    bf16._load()
    assert all(type(m) is torch.nn.Linear for m in bf16._lm.modules() if isinstance(m, torch.nn.Linear))


@needs_onednn
def test_cpu_generation_runs_through_onednn_and_draws_the_same_tokens(tmp_path: Path) -> None:
    """The transformers backend routes a float32 CPU model through oneDNN (said in its manifest), draws the
    tokens torch's path draws (seeded sampling: only a draw within float32 rounding of a boundary could
    differ), and a compiled decode step takes torch's path, which dynamo can trace."""
    pytest.importorskip("transformers")
    import dataclasses

    from polytox._util.onednn import restore_linears
    from polytox.generation.hf import TransformersGenerator
    from polytox.spec import GenerationSpec
    from polytox.types import GenerationRequest, Prompt, derive_seed

    from .tiny_models import make_tiny_lm

    path = make_tiny_lm(tmp_path / "llama", arch="llama")
    spec = GenerationSpec(model=str(path), samples=4, max_new_tokens=12, temperature=1.0, top_p=0.9,
                          batch_size=3, chat_template="never", dtype="float32", device="cpu")
    prompts = [Prompt(f"p{i}", text, "en") for i, text in enumerate(["the weather was", "shut up", "my neighbour"])]
    reqs = [GenerationRequest(p, j, derive_seed(0, p.id, j)) for p in prompts for j in range(4)]
    gen = TransformersGenerator(spec)
    assert gen.onednn_linears > 0 and gen.describe()["linear_kernel"] == "onednn"
    ours = [o.text for o in gen.generate(reqs)]
    assert restore_linears(gen.model) == gen.onednn_linears
    theirs = [o.text for o in gen.generate(reqs)]
    assert all(ours) and sum(a == b for a, b in zip(ours, theirs, strict=True)) >= 0.9 * len(reqs)
    compiled = TransformersGenerator(dataclasses.replace(spec, options=(("compile", "true"),)))
    assert compiled.onednn_linears == 0 and compiled.describe()["linear_kernel"] == "torch"
    assert all(type(m) is torch.nn.Linear for m in compiled.model.modules() if isinstance(m, torch.nn.Linear))
