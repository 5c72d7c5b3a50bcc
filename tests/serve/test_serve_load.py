"""Load and fault behaviour of ``polytox serve`` on 127.0.0.1, bounded in size and time: throughput at
concurrency 1/8/64 with every answer checked against its own text, micro-batching, per-key quotas at twice
the quota (429s, never over it), a full queue and twice the capacity (429 with Retry-After, answered requests within
--max-queue-wait), no memory growth under overload (a real
``polytox serve`` process), and graceful shutdown with in-flight requests finished (SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("profanity_check")

from polytox.scoring import build_scorer
from polytox.serve.loadgen import run_load
from polytox.serve.runner import ServerThread

from .helpers import ANALYZE, KEY, TEXTS, analyze_body, call, error_reason, running

SRC = Path(__file__).resolve().parents[2] / "src"
# Many distinct English texts (each with a known score), so batches mix texts and a mix-up shows.
LOAD_TEXTS = [f"{t} (note {i})" for i in range(16) for t in TEXTS]


@pytest.fixture(scope="module")
def expected() -> dict[str, float]:
    scores = build_scorer("svm", {"cache": "off"}).score(LOAD_TEXTS, ["en"] * len(LOAD_TEXTS))
    return {t: s.values["toxicity"] for t, s in zip(LOAD_TEXTS, scores, strict=True)}  # type: ignore[index]


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerThread]:
    with running("svm", max_batch=64, max_wait_ms=2.0) as server:
        yield server


@pytest.mark.parametrize("concurrency", [1, 8, 64])
def test_throughput_and_every_answer_matches(srv: ServerThread, expected: dict[str, float],
                                             concurrency: int) -> None:
    metrics = srv.app.state.server.metrics
    before_batches = metrics.sample("polytox_serve_batch_size_count") or 0.0
    before_texts = metrics.sample("polytox_serve_batch_size_sum") or 0.0
    n = max(60, 4 * concurrency)
    result = run_load(srv.url, LOAD_TEXTS, concurrency=concurrency, requests=n, key=KEY, expected=expected)
    assert result.statuses == {200: n} and result.mismatched == 0 and result.transport_errors == 0
    batches = metrics.sample("polytox_serve_batch_size_count") - before_batches
    mean_batch = (metrics.sample("polytox_serve_batch_size_sum") - before_texts) / batches
    print(f"\nconcurrency {concurrency}: {result.throughput:.0f} req/s, p50 {result.percentile_ms(50):.1f} ms, "
          f"p99 {result.percentile_ms(99):.1f} ms, mean batch {mean_batch:.1f}")
    if concurrency == 1:
        assert mean_batch == 1.0
    if concurrency == 64:
        assert mean_batch > 2.0  # concurrent requests shared scorer calls


def test_twice_the_quota_gets_429s_never_more_than_the_quota(expected: dict[str, float]) -> None:
    qps, seconds = 20.0, 2.0
    with running("svm", qps=qps, burst=1) as server:
        result = run_load(server.url, LOAD_TEXTS, concurrency=8, requests=int(2 * qps * seconds), key=KEY,
                          expected=expected, rate=2 * qps)
        # Back-to-back probes: at 20/s with a burst of 1, at most one in any 50 ms is let through.
        probes = [call(server.url, f"{ANALYZE}?key={KEY}", analyze_body("hello", languages=["en"]))
                  for _ in range(5)]
        status, headers, body = next((p for p in probes if p[0] == 429), probes[-1])
        other = call(server.url, ANALYZE + "?key=other", analyze_body("hello", languages=["en"]))
    assert set(result.statuses) == {200, 429} and result.mismatched == 0
    assert result.ok <= qps * result.elapsed_s + 2  # the quota holds
    assert result.statuses[429] >= 0.3 * sum(result.statuses.values())
    assert status == 429 and error_reason(body) == "RATE_LIMIT_EXCEEDED"
    assert "AnalyzeRequestsPerMinutePerProject" in body["error"]["message"] and int(headers["retry-after"]) >= 1
    assert other[0] == 400  # an unknown key is refused before quota (keys: only KEY)


def test_full_queue_answers_429_and_recovers() -> None:
    attrs = "toxicity"
    with running("fake", {"attributes": attrs, "delay": "0.3"}, max_queue=4, max_batch=2) as server:
        outcomes: list[tuple[int, object]] = []
        lock = threading.Lock()

        def one(i: int) -> None:
            status, headers, body = call(server.url, f"{ANALYZE}?key={KEY}",
                                         analyze_body(f"text number {i}", languages=["en"]))
            with lock:
                outcomes.append((status, body if status != 429 else (headers.get("retry-after"), body)))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        health = call(server.url, "/healthz", method="GET")[2]
    statuses = [s for s, _ in outcomes]
    assert statuses.count(429) >= 4 and statuses.count(200) >= 4 and set(statuses) == {200, 429}
    refused = [extra for s, extra in outcomes if s == 429]
    assert all(int(retry) >= 1 and error_reason(body) == "SERVER_OVERLOADED" for retry, body in refused)
    assert all("the scoring queue is full (4 texts waiting)" in body["error"]["message"] for _, body in refused)
    assert health["queue"] == 0


def _overload(capacity_delay: float, max_batch: int, seconds: float, concurrency: int, bound: float,
              expected: dict[str, float]) -> None:
    """Drive a server whose scorer serves ``max_batch / capacity_delay`` texts/s at twice that rate, with
    ``--max-queue-wait bound``: every answer is a 200 (the right score) or a 429 with Retry-After, a good
    share are 429s, and the answered requests' p99 stays within the bound plus two batches."""
    capacity = max_batch / capacity_delay
    options = {"attributes": "toxicity", "delay": str(capacity_delay), "batch_size": str(max_batch)}
    fake = build_scorer("fake", {"cache": "off", **options})
    want = {t: s.values["toxicity"] for t, s in zip(LOAD_TEXTS, fake.score(LOAD_TEXTS, ["en"] * len(LOAD_TEXTS)),
                                                   strict=True)}  # type: ignore[index]
    with running(fake, max_batch=max_batch, max_queue_wait_s=bound) as server:
        result = run_load(server.url, LOAD_TEXTS, concurrency=concurrency, requests=int(2 * capacity * seconds),
                          key=KEY, expected=want, rate=2 * capacity, timeout=30)
        shed = server.app.state.server.metrics.sample("polytox_serve_shed_texts_total")
    fake.close()
    total = sum(result.statuses.values())
    p99 = result.percentile_ms(99) / 1000
    print(f"\n2x of {capacity:.0f} texts/s for {seconds:g} s ({total / result.elapsed_s:.0f} req/s offered): "
          f"{dict(result.statuses)}, "
          f"p50 {result.percentile_ms(50):.0f} ms, p99 {p99 * 1000:.0f} ms (bound {bound} s)")
    assert set(result.statuses) <= {200, 429} and result.transport_errors == 0 and result.mismatched == 0
    assert result.no_retry_after == 0
    assert result.statuses[429] >= 0.25 * total and result.ok >= 0.3 * total
    assert shed == result.statuses[429]
    assert p99 <= bound + 2 * capacity_delay + 0.5  # the bound holds (plus two batches and scheduling slack)


def test_twice_the_capacity_sheds_with_429_and_keeps_latency_bounded(expected: dict[str, float]) -> None:
    _overload(capacity_delay=0.1, max_batch=4, seconds=2.0, concurrency=64, bound=0.5, expected=expected)


@pytest.mark.slow
def test_twice_the_capacity_sheds_with_429_larger(expected: dict[str, float]) -> None:
    _overload(capacity_delay=0.1, max_batch=8, seconds=8.0, concurrency=192, bound=1.0, expected=expected)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC), "POLYTOX_SERVE_KEYS": KEY, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "polytox.cli.main", "serve", "--port", str(port), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if call(url, "/healthz", method="GET")[0] == 200:
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"polytox serve did not start: {proc.communicate()[0].decode()[-2000:]}")


@pytest.mark.slow
def test_no_memory_growth_over_quota_and_queue(tmp_path: Path, expected: dict[str, float]) -> None:
    psutil = pytest.importorskip("psutil")
    proc, url = _start(["--scorer", "svm", "--scorer-opt", "cache=off", "--max-queue", "16", "--qps", "150",
                        "--burst", "20"], tmp_path)
    try:
        mem = psutil.Process(proc.pid)
        run_load(url, LOAD_TEXTS, concurrency=64, requests=400, key=KEY, expected=expected)  # warm-up
        rss_before = mem.memory_info().rss
        results = [run_load(url, LOAD_TEXTS, concurrency=64, requests=800, key=KEY, expected=expected)
                   for _ in range(2)]
        rss_after = mem.memory_info().rss
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    total = sum((r.statuses for r in results), start=type(results[0].statuses)())
    assert total[429] > 0 and total[200] > 0  # over quota, and still serving
    assert all(r.mismatched == 0 and r.transport_errors == 0 for r in results)
    growth_mb = (rss_after - rss_before) / 2**20
    print(f"\nRSS growth over 1,600 overloaded requests: {growth_mb:.1f} MiB; statuses {dict(total)}")
    assert growth_mb < 25


def test_sigterm_finishes_in_flight_requests(tmp_path: Path) -> None:
    proc, url = _start(["--scorer", "fake", "--scorer-opt", "delay=1.5", "--scorer-opt", "cache=off"], tmp_path)
    answers: list[tuple[int, object]] = []

    def slow() -> None:
        status, _, body = call(url, f"{ANALYZE}?key={KEY}", analyze_body("you idiot", languages=["en"]))
        answers.append((status, body))

    expected = build_scorer("fake", {"cache": "off"}).score(["you idiot"], ["en"])[0].get("toxicity")
    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)  # the request is in the scorer now
    proc.send_signal(signal.SIGTERM)
    thread.join(30)
    code = proc.wait(30)
    log = proc.stdout.read().decode() if proc.stdout else ""
    assert answers and answers[0][0] == 200, (answers, log)
    assert answers[0][1]["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == expected  # type: ignore[index]
    assert code in (0, -signal.SIGTERM), log  # uvicorn re-raises the signal once shut down cleanly
    assert "queue drained; 1 texts in 1 batches" in log and "Finished server process" in log
    with pytest.raises(OSError):
        call(url, "/healthz", method="GET")
