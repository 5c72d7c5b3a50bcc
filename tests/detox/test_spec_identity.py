"""``--detox`` in a run's spec: canonical spellings and spec hashes pinned, so moving where the canonical form
is computed (``polytox.detox`` provides it to the spec through ``polytox.registry``) never renames a run."""

from __future__ import annotations

import pytest

from polytox.spec import spec_from_flat

# written -> (canonical form stored in the spec, the spec hash of ``model=tiny`` with it); measured before
# the spec stopped importing ``polytox.detox``
PINNED = {
    "word_filter": ("word-filter", "ec0e4726e690085d"),
    "WORD-FILTER:end=exact": ("word-filter:end=exact", "4ac6f04f0d21f3d0"),
    "vocab_shift:beta=3,path=/x": ("vocab-shift:beta=3,path=/x", "2993aac9c52fb26f"),
    " dexperts : anti=a , expert=e, alpha=2": ("dexperts:alpha=2,anti=a,expert=e", "ff4545177bc9372d"),
    "atcon": ("atcon", "6e3c603d057b8928"),
    "pplm:top-k=5,head=h,step_size=0.1": ("pplm:head=h,step_size=0.1,top_k=5", "a5152bb17c27f341"),
}


@pytest.mark.parametrize("written", sorted(PINNED))
def test_detox_canonical_form_and_spec_hash_are_pinned(written: str) -> None:
    spec = spec_from_flat({"model": "tiny", "detox": written})
    assert (spec.generation.detox, spec.spec_hash()) == PINNED[written]


def test_a_run_without_detox_keeps_its_hash() -> None:
    assert spec_from_flat({"model": "tiny"}).spec_hash() == "bf639825c8464155"


def test_the_spec_and_the_backends_reach_detox_only_through_its_hooks() -> None:
    """Importing the spec and the backends loads no detox code; the first ``--detox`` spec loads it through
    the registry's hook and canonicalises exactly as before."""
    import subprocess
    import sys

    code = (
        "import sys, polytox.spec as s, polytox.generation.hooks, polytox.generation.vllm_backend\n"
        "before = 'polytox.detox' in sys.modules\n"
        "print(before, s.spec_from_flat({'model': 'tiny', 'detox': 'word_filter'}).generation.detox)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "word-filter"]


def test_an_unregistered_hook_is_one_clear_error() -> None:
    from polytox import registry
    from polytox.errors import PolytoxError

    assert registry.hook("detox.canonical")("atcon") == "atcon"  # a group's provider is imported on first use
    with pytest.raises(PolytoxError, match=r"no hook 'other\.thing' is registered; known: .*detox\.canonical"):
        registry.hook("other.thing")
