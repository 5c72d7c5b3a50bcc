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
