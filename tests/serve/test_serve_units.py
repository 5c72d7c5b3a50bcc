"""Units of ``polytox serve`` without a server: key loading, the quota bucket, the CLI's refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette")

from polytox.cli.main import main
from polytox.errors import PolytoxError
from polytox.serve.batch_http import build_batch_response, parse_batch
from polytox.serve.errors import ApiError
from polytox.serve.quotas import KEYS_ENV, KeyStore, Quotas


def test_keys_from_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYS_ENV, " a1 , b2 ,")
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("# lab keys\nc3  # the analysis box\n\n")
    store = KeyStore.load(str(keys_file))
    assert len(store) == 3 and all(store.check(k) for k in ("a1", "b2", "c3"))
    assert not store.check("a") and not store.check("") and not store.check(None) and not store.check("a1 ")
    monkeypatch.delenv(KEYS_ENV)
    with pytest.raises(PolytoxError, match="no API keys configured"):
        KeyStore.load(None)
    assert KeyStore.load(None, open_access=True).check(None)
    with pytest.raises(PolytoxError, match="cannot read the keys file"):
        KeyStore.load(str(tmp_path / "missing.txt"))


def test_quota_bucket_rate_burst_and_debt() -> None:
    now = [0.0]
    quotas = Quotas(qps=2.0, burst=2.0, clock=lambda: now[0])
    assert quotas.take("k") == 0.0 and quotas.take("k") == 0.0
    assert quotas.take("k") == pytest.approx(0.5)  # empty: one token in 0.5 s at 2 qps
    assert quotas.take("other") == 0.0  # each key has its own bucket
    now[0] = 0.5
    assert quotas.take("k") == 0.0 and quotas.take("k") > 0
    now[0] = 10.0
    assert quotas.take("k", 10) == 0.0  # a large request goes into debt (needs a full bucket) ...
    assert quotas.take("k") == pytest.approx(4.5)  # ... which the next requests pay: (1 - (2 - 10)) / 2
    assert Quotas(qps=0).take("k", 1000) == 0.0  # no quota


def test_batch_parsing_and_answer_ids() -> None:
    body = (b"--BOUND\r\nContent-Type: application/http\r\nContent-ID: <abc+1>\r\n\r\n"
            b"POST /v1alpha1/comments:analyze?key=k&alt=json HTTP/1.1\r\nContent-Type: application/json\r\n"
            b"content-length: 2\r\n\r\n{}\r\n--BOUND--\r\n")
    subs = parse_batch("multipart/mixed; boundary=BOUND", body)
    assert [(s.method, s.target, s.body, s.content_id) for s in subs] == [
        ("POST", "/v1alpha1/comments:analyze?key=k&alt=json", b"{}", "<abc+1>")]
    out, media = build_batch_response([(subs[0], 400, b'{"error": {}}')])
    assert media.startswith("multipart/mixed; boundary=batch_")
    assert b"Content-ID: <response-abc+1>" in out and b"HTTP/1.1 400 Bad Request" in out
    with pytest.raises(ApiError, match="multipart/mixed"):
        parse_batch("application/json", b"{}")
    too_many = b"".join(b"--B\r\nContent-Type: application/http\r\n\r\nPOST /x HTTP/1.1\r\n\r\n{}\r\n"
                        for _ in range(101)) + b"--B--\r\n"
    with pytest.raises(ApiError, match="at most 100 calls"):
        parse_batch("multipart/mixed; boundary=B", too_many)


def test_cli_refuses_to_serve_without_keys(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    assert main(["serve", "--scorer", "fake"]) == 2
    assert "no API keys configured" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # refused by the parser's range check (cli/checks.py)
        main(["serve", "--scorer", "fake", "--open", "--max-batch", "0"])
    assert exc.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--scorer", "fake", "--open", "--max-queue-wait", "-1"])
    assert exc.value.code == 2 and "--max-queue-wait" in capsys.readouterr().err


def test_batcher_estimates_the_wait_in_batch_cycles() -> None:
    """The wait is counted in batches ahead (texts over max_batch, rounded up, less the request's own batch)
    times the measured cycle; a request over the bound is refused with Shed before anything is queued, and
    a request that fits an idle batch is admitted however slow the scorer."""
    import asyncio

    from polytox.scoring import build_scorer
    from polytox.serve.batcher import MicroBatcher, Shed

    async def scenario() -> None:
        batcher = MicroBatcher(build_scorer("fake", {"cache": "off"}), max_batch=4, max_queue=100,
                               max_queue_wait_s=1.0)
        batcher.start()
        assert batcher.estimated_wait(50) == 0.0  # nothing measured yet: admitted
        await batcher.score(["a", "b"], ["en", "en"])
        assert batcher.cycle_s > 0
        batcher.cycle_s = 0.25  # pin the measurement: 4 batches ahead fit in the bound
        assert batcher.estimated_wait(4) == 0.0 and batcher.estimated_wait(20) == 1.0
        assert batcher.estimated_wait(21) == 1.25
        with pytest.raises(Shed, match=r"over the bound of 1 s \(--max-queue-wait\)") as err:
            await batcher.score(["x"] * 21, ["en"] * 21)
        assert err.value.retry_after_s == pytest.approx(0.25) and batcher.shed == 21 and batcher.pending == 0
        assert len(await batcher.score(["x"] * 20, ["en"] * 20)) == 20
        batcher.cycle_s = 30.0  # a scorer far slower than the bound still serves a request on an idle server
        assert len(await batcher.score(["y"] * 4, ["en"] * 4)) == 4
        await batcher.close()

    asyncio.run(scenario())
