"""A run's distinct-n and continuation lengths: computed once, kept in RUN/derived/, never trusted stale."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from polytox._util import derived
from polytox.analysis.detox_compare import lengths
from polytox.detox import text_stats as ts
from polytox.detox.diversity import diversity
from polytox.store import RunStore
from polytox.types import Generation


def _gen(pid: str, i: int, text: str | None, n: int) -> Generation:
    return Generation(prompt_id=pid, sample_index=i, text=text, finish_reason="length" if text is not None
                      else "error", n_tokens=n, error=None if text is not None else "boom")


def _store(path: Path) -> RunStore:
    store = RunStore(path)
    store.write_generations(0, [_gen("p0", 0, "a b a", 3), _gen("p0", 1, "a b c", 3), _gen("p0", 2, None, 0)])
    store.write_generations(1, [_gen("p1", 0, "x y", 2), _gen("p1", 1, "  ", 0), _gen("p1", 2, "x y", 2)])
    return store


def _trusted(store: RunStore) -> dict[str, object] | None:
    return derived.trusted(ts.derived_path(store), ts.settings(), ts.input_identities(store))


def test_text_stats_are_the_textbook_numbers_and_are_kept_with_the_part_checksums(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path / "run")
    got = ts.text_stats(store)
    textbook = diversity({"p0": ["a b a", "a b c", None], "p1": ["x y", "  ", "x y"]})
    assert got["diversity"] == textbook
    assert got["lengths"] == {"mean_tokens": (3 + 3 + 2 + 0 + 2) / 5, "empty_share": 1 / 5}
    kept = json.loads((ts.derived_path(store)).read_text())
    assert sorted(kept["inputs"]) == ["generations/part-00000.parquet", "generations/part-00001.parquet"]
    recorded = (store.path / "generations" / ".part-00000.parquet.sha256").read_text().split()[0]
    assert kept["inputs"]["generations/part-00000.parquet"].startswith(recorded + ":")
    # the second read computes nothing: the kept numbers are returned as they are
    monkeypatch.setattr(ts, "compute_text_stats", lambda s: pytest.fail("recomputed a current derived file"))
    assert ts.text_stats(store) == got
    assert lengths(store.path) == (2.0, 0.2)


def test_a_changed_repaired_or_added_part_invalidates_the_derived_file(tmp_path: Path) -> None:
    store = _store(tmp_path / "run")
    before = ts.text_stats(store)
    # a repair rewrites a part (new bytes, new checksum): the kept numbers are stale and recomputed
    store.write_generations(1, [_gen("p1", 0, "x y z", 3), _gen("p1", 1, "x", 1), _gen("p1", 2, "q", 1)])
    after = ts.text_stats(store)
    assert after != before
    assert after["diversity"] == diversity({"p0": ["a b a", "a b c", None], "p1": ["x y z", "x", "q"]})
    assert json.loads((ts.derived_path(store)).read_text())["values"] == after  # rewritten
    # a part added (a resumed run's next shard) counts too
    store.write_generations(2, [_gen("p2", 0, "new words here", 3)])
    assert ts.text_stats(store)["diversity"]["n_prompts"] == 3
    # bytes changed in place with the same checksum file (damage): size/mtime differ, so not trusted
    part = store.path / "generations" / "part-00002.parquet"
    kept = (ts.derived_path(store)).read_text()
    stat = part.stat()
    os.utime(part, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _trusted(store) is None
    assert (ts.derived_path(store)).read_text() == kept  # checking writes nothing


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # torn
        lambda text: "not json",
        lambda text: text.replace('"dist_1": 0.', '"dist_1": 1.'),  # an edited value: its digest no longer fits
        lambda text: json.dumps({**json.loads(text), "settings": {"version": 0}}),  # another version
    ],
)
def test_a_damaged_derived_file_is_never_trusted(tmp_path: Path, damage: object) -> None:
    store = _store(tmp_path / "run")
    right = ts.text_stats(store)
    path = ts.derived_path(store)
    path.write_text(damage(path.read_text()))  # type: ignore[operator]
    assert _trusted(store) is None
    assert ts.text_stats(store) == right
    assert _trusted(store) == right  # rewritten whole


def test_a_read_only_run_still_gets_its_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path / "run")

    def refuse(path: Path, text: str) -> None:
        raise PermissionError(13, "read-only file system")

    monkeypatch.setattr(derived, "atomic_write_text", refuse)
    assert ts.text_stats(store)["lengths"]["empty_share"] == 0.2
    assert not (ts.derived_path(store)).exists()


def test_distinct_n_equals_the_textbook_slices_on_random_texts() -> None:
    import random

    from polytox.detox.diversity import distinct_n

    def textbook(texts: list[str]) -> dict[int, float] | None:
        words = [t.split(" ") for t in texts]
        total = sum(len(w) for w in words)
        grams = {n: {tuple(w[i : i + n]) for w in words for i in range(len(w) - n + 1)} for n in (1, 2, 3)}
        return {n: len(g) / total for n, g in grams.items()} if total else None

    rng = random.Random(0)
    vocab = ["a", "b", "c", "", "x y", "b  c"]  # empty words and double spaces: split(" ") keeps them
    for _ in range(2000):
        texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(0, 4))]
        assert distinct_n(texts) == textbook(texts), texts
