"""The one helper per job of ``polytox._util``: number formatting, booleans and typed options, the token bucket."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polytox._util.numfmt import fmt_num, fmt_share
from polytox._util.options import Option, as_bool, typed_options
from polytox._util.ratelimit import TokenBucket
from polytox.errors import BadValueError, PolytoxError


def test_fmt_num_formats_reals_and_keeps_counts_and_names() -> None:
    assert fmt_num(0.12345) == "0.123" and fmt_num(np.float32(0.5)) == "0.500" and fmt_num(2.0, 1) == "2.0"
    assert fmt_num(12) == "12" and fmt_num(np.int64(7)) == "7" and fmt_num("en") == "en"
    assert fmt_num(None) == "-" and fmt_num(None, missing=None) is None


def test_fmt_num_writes_signs_percentages_and_nan_as_asked() -> None:
    assert fmt_num(0.0081, signed=True) == "+0.008" and fmt_num(-1.071, 1, signed=True) == "-1.1"
    assert fmt_num(0.125, 1, percent=True) == "12.5%" and fmt_num(None, 1, percent=True) == "-"
    assert fmt_num(float("nan")) == "nan" and fmt_num(float("nan"), nan="-") == "-"
    assert fmt_num(3, signed=True, percent=True) == "3"  # a count stays a count


def test_fmt_share_writes_a_share_with_its_interval_in_points() -> None:
    assert fmt_share(0.125, [0.1021, 0.149]) == "12.50% [10.21, 14.90]"
    assert fmt_share(0.125) == "12.50%" and fmt_share(0.125, []) == "12.50%"
    assert fmt_share(None, [0.1, 0.2]) == "-"


def test_the_old_formatters_are_the_one_formatter() -> None:
    from polytox.cli.common import fmt

    assert fmt is fmt_num


def test_as_bool_reads_the_same_words_everywhere_and_refuses_others() -> None:
    assert all(as_bool(w) for w in ("1", "true", "Yes", " on ", True))
    assert not any(as_bool(w) for w in ("0", "false", "NO", "off", False))
    with pytest.raises(BadValueError, match="send_seed takes true or false"):
        as_bool("maybe", "send_seed")


def test_typed_options_check_then_convert() -> None:
    schema = {"n": Option("int"), "rate": Option("float"), "seed": Option("bool"), "mode": Option(choices=("a", "b")),
              "size": Option("int", words=("auto",))}
    got = typed_options("backend 'x'", schema, {"n": "3", "rate": "0.5", "seed": "off", "mode": "b", "size": "auto"})
    assert got == {"n": 3, "rate": 0.5, "seed": False, "mode": "b", "size": "auto"}
    with pytest.raises(PolytoxError, match=r"backend 'x' has no option 'nn' \(did you mean 'n'\?\)"):
        typed_options("backend 'x'", schema, {"nn": "3"})
    with pytest.raises(BadValueError, match="mode takes one of 'a', 'b'"):
        typed_options("backend 'x'", schema, {"mode": "c"})


def test_token_bucket_take_never_blocks_and_goes_into_debt() -> None:
    now = [0.0]
    bucket = TokenBucket(2.0, 2, clock=lambda: now[0])
    assert bucket.take() == 0.0 and bucket.take() == 0.0  # the burst
    assert bucket.take() == pytest.approx(0.5)  # one token at 2/s
    now[0] = 1.0  # two tokens back
    assert bucket.take(5) == 0.0  # more than the capacity: granted on a full bucket, paid for after
    assert bucket.take() == pytest.approx(2.0)  # 3 tokens of debt + 1 needed, at 2/s


def test_open_once_writes_under_a_temporary_name_and_reads_without_writing(tmp_path: Path) -> None:
    import sqlite3

    from polytox._util.sqlite import open_once

    tmp = tmp_path / "index" / ".texts.sqlite.tmp"
    db = open_once(tmp, "CREATE TABLE docs (key INTEGER PRIMARY KEY, text TEXT)")
    db.execute("INSERT INTO docs VALUES (1, 'hello')")
    db.commit()
    db.close()
    final = tmp.replace(tmp.with_name("texts.sqlite"))
    reader = open_once(final, read_only=True)
    assert reader.execute("SELECT text FROM docs WHERE key = 1").fetchone() == ("hello",)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("INSERT INTO docs VALUES (2, 'x')")
    reader.close()
    assert sorted(p.name for p in final.parent.iterdir()) == ["texts.sqlite"]  # no journal left beside it
