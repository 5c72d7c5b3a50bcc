"""The Perspective scorer against a real HTTP server on 127.0.0.1 (perspective_server)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from polytox.errors import PolytoxError
from polytox.scoring import build_scorer
from polytox.scoring.pacing import AdaptiveTokenBucket
from polytox.scoring.perspective import PerspectiveScorer, parse_error, truncate_utf8

from .perspective_server import FakePerspective, model_score

KEY = "test-key-7f3a9c"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSPECTIVE_API_KEY", KEY)


def scorer(server: FakePerspective, **opts: str) -> PerspectiveScorer:
    base = {"url": server.url, "qps": "200", "backoff": "0.01", "backoff_max": "0.05"}
    return PerspectiveScorer(**{**base, **opts})  # type: ignore[arg-type]


def test_request_follows_the_contract_and_reads_summary_score() -> None:
    texts = ["Nice day. You stupid idiot.", "Hallo Welt, du Idiot", "你好世界"]
    with FakePerspective(key=KEY) as server:
        s = scorer(server)
        scores = s.score(texts, ["en", "de", "zh"])
        s.close()
    for text, score in zip(texts, scores, strict=True):
        assert score.ok and score.values == {"toxicity": model_score(text)}
    # summaryScore, not the first sentence's spanScores[0] (they differ by construction).
    assert scores[0].get("toxicity") != model_score("Nice day.\x00span")
    assert scores[0].get("toxicity") == pytest.approx(0.72, abs=0.11)
    sent = {r.text: r for r in server.log}
    assert {r.status for r in server.log} == {200}
    for text, lang in zip(texts, ["en", "de", "zh"], strict=True):
        assert sent[text].languages == [lang]
        assert sent[text].do_not_store is True
        assert sent[text].attributes == ["TOXICITY"]
        assert sent[text].key == KEY


def test_ptp_attribute_preset_requests_and_returns_six_attributes() -> None:
    with FakePerspective(key=KEY) as server:
        s = scorer(server, attributes="ptp")
        [score] = s.score(["you moron"], ["en"])
        s.close()
    assert s.attributes == ("toxicity", "severe_toxicity", "identity_attack", "insult", "profanity", "threat")
    assert server.log[0].attributes == sorted(a.upper() for a in s.attributes)
    assert score.values == {a: model_score("you moron", a.upper()) for a in s.attributes}


def test_english_only_attributes_restrict_languages() -> None:
    with FakePerspective(key=KEY) as server:
        s = scorer(server, attributes="TOXICITY,FLIRTATION")
        assert s.languages == frozenset({"en"})
        scores = s.score(["hello there", "bonjour"], ["en", "fr"])
        s.close()
    assert scores[0].ok and scores[1].error is not None and "LANGUAGE_NOT_SUPPORTED" in scores[1].error
    assert server.count() == 1  # the French text was refused before any request


def test_truncates_to_20480_bytes_on_a_character_boundary() -> None:
    texts = ["é" * 15_000, "x" + "€" * 10_000, "a" * 20_480, "ok " * 30_000]
    with FakePerspective(key=KEY) as server:
        s = scorer(server)
        scores = s.score(texts, ["fr", "en", "en", "en"])
        s.close()
    assert all(sc.ok for sc in scores), [sc.error for sc in scores]
    by_text = {r.text: r for r in server.log}
    for text in texts:
        sent = next(t for t in by_text if t is not None and text.startswith(t))
        assert by_text[sent].nbytes <= 20_480
        assert text.encode()[: by_text[sent].nbytes] == sent.encode()  # a prefix, no character split
    assert by_text["é" * 10_240].nbytes == 20_480
    assert by_text["x" + "€" * 6_826].nbytes == 20_479  # 1 + 3 * 6826; the next € would not fit
    assert "a" * 20_480 in by_text  # exactly at the limit: untouched
    assert s.stats["truncated"] == 3
    assert truncate_utf8("ab", 1) == ("a", True) and truncate_utf8("é", 1) == ("", True)


def test_400_is_not_retried_and_keeps_the_reason_permanently(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakePerspective(key=KEY) as server:
        opts = {"url": server.url, "qps": "200", "languages": "any", "backoff": "0.01", "cache": str(cache)}
        s = build_scorer("perspective", opts)
        first = s.score(["hello friend", "\u200b\u200b"], ["sw", "en"])
        s.close()
        assert server.count() == 2  # one request each: 400s are never retried
        s = build_scorer("perspective", opts)
        again = s.score(["hello friend", "\u200b\u200b"], ["sw", "en"])
        s.close()
        assert server.count() == 2  # permanent errors come from the cache
    assert (first[0].error or "").startswith("PERSPECTIVE_400 LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE")
    assert first[1].error is not None and first[1].error.startswith("PERSPECTIVE_400 COMMENT_EMPTY")
    assert not first[0].transient and first[0].get("toxicity") is None
    assert [a.error for a in again] == [f.error for f in first]


def test_retry_once_without_the_language_hint() -> None:
    with FakePerspective(key=KEY) as server:
        s = scorer(server, retry_without_language="true")
        assert s.languages is None  # any language may be tried
        scores = s.score(["hello friend", "ciao ciao ŝ"], ["sw", "xx"])
        s.close()
    assert scores[0].values == {"toxicity": model_score("hello friend")}
    # Not detectable by the server either: the second 400 is recorded, and there were exactly two tries.
    assert scores[1].error is not None and "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE" in scores[1].error
    tries = [(r.text, r.languages) for r in server.log]
    assert tries.count(("hello friend", ["sw"])) == 1 and tries.count(("hello friend", None)) == 1
    assert len([t for t in tries if t[0] == "ciao ciao ŝ"]) == 2
    assert s.stats["retried_without_language"] == 2


def test_retries_5xx_and_timeouts_then_scores() -> None:
    script = {"flaky": [503, 500, 503]}
    with FakePerspective(key=KEY, script=script, slow_texts={"slow": 1.5}) as server:
        s = scorer(server, timeout="0.4")
        scores = s.score(["flaky", "slow", "fine"], ["en", "en", "en"])
        s.close()
    assert [sc.values for sc in scores] == [{"toxicity": model_score(t)} for t in ("flaky", "slow", "fine")]
    assert [r.status for r in server.log if r.text == "flaky"] == [503, 500, 503, 200]
    assert len([r for r in server.log if r.text == "slow"]) == 2  # the first timed out
    assert s.stats["timeout"] == 1 and s.stats["retries"] == 4


def test_gives_up_with_a_transient_error_that_is_not_cached(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakePerspective(key=KEY, script={"down": [503] * 3}) as server:
        opts = {"url": server.url, "qps": "200", "backoff": "0.01", "max_attempts": "3", "cache": str(cache)}
        s = build_scorer("perspective", opts)
        [failed, ok] = s.score(["down", "up"], ["en", "en"])
        s.close()
        assert failed.transient and failed.get("toxicity") is None
        assert (failed.error or "").startswith("PERSPECTIVE_TRANSIENT: gave up after 3 tries")
        s = build_scorer("perspective", opts)  # a rerun retries it; "up" comes from the cache
        [again, ok2] = s.score(["down", "up"], ["en", "en"])
        s.close()
    assert again.values == {"toxicity": model_score("down")} and ok2.values == ok.values
    assert [r.text for r in server.log].count("up") == 1


def test_429_is_retried_and_the_pacing_keeps_under_the_quota() -> None:
    """Client told 40 qps, server allows 10: AIMD slows down, every text is scored, the quota holds."""
    texts = [f"text number {i}" for i in range(40)]
    with FakePerspective(key=KEY, qps=10) as server:
        s = scorer(server, qps="40", concurrency="8", backoff="0.2", backoff_max="1")
        scores = s.score(texts, ["en"] * len(texts))
        s.close()
    assert all(sc.ok for sc in scores)
    assert server.max_in_window() <= 10
    assert server.count(429) > 0 and s.stats["http_429"] == server.count(429)
    assert s.bucket.rate < 40 * 0.98


def test_paced_at_the_quota_without_429() -> None:
    texts = [f"paced {i}" for i in range(30)]
    with FakePerspective(key=KEY, qps=10, latency_s=0.05) as server:
        s = scorer(server, qps="10")
        start = time.monotonic()
        scores = s.score(texts, ["en"] * len(texts))
        elapsed = time.monotonic() - start
        s.close()
    assert all(sc.ok for sc in scores)
    assert server.count(429) <= 3  # <= 10%: only scheduling jitter at a window's edge can cause one
    assert server.max_in_window() <= 10
    assert 2.5 <= elapsed <= 8.0  # 30 requests at ~9.8/s (about 3 s), with slack for a loaded CI machine


def test_key_only_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(PolytoxError, match="PERSPECTIVE_API_KEY") as err:
        PerspectiveScorer(url="http://127.0.0.1:9", key="sk-secret-value")  # type: ignore[arg-type]
    assert "sk-secret-value" not in str(err.value)
    monkeypatch.delenv("PERSPECTIVE_API_KEY")
    with pytest.raises(PolytoxError, match="PERSPECTIVE_API_KEY is not set"):
        PerspectiveScorer(url="http://127.0.0.1:9")
    monkeypatch.setenv("PERSPECTIVE_API_KEY", KEY)
    with FakePerspective(key=KEY) as server:
        s = build_scorer("perspective", {"url": server.url, "qps": "100", "cache": str(tmp_path / "c.sqlite"),
                                         "archive": str(tmp_path / "a.sqlite")})
        s.score(["hello", ""], ["en", "en"])
        desc = json.dumps(s.describe())
        s.close()
    assert KEY not in desc and server.url in desc
    for file in tmp_path.iterdir():
        assert KEY.encode() not in file.read_bytes(), file


def test_wrong_key_stops_the_run_without_hammering(tmp_path: Path) -> None:
    with FakePerspective(key="the-right-one") as server:
        s = build_scorer("perspective", {"url": server.url, "qps": "100", "concurrency": "2",
                                         "cache": str(tmp_path / "c.sqlite")})
        scores = s.score([f"t{i}" for i in range(20)], ["en"] * 20)
        s.close()
    assert server.count(403) <= 2  # at most one request per worker thread before the stop
    assert all(sc.transient and sc.error and "PERSPECTIVE_FATAL: HTTP 403" in sc.error for sc in scores)
    assert all(KEY not in (sc.error or "") for sc in scores)
    db = sqlite3.connect(tmp_path / "c.sqlite")
    assert db.execute("select count(*) from scores").fetchone()[0] == 0  # nothing cached


def test_every_response_is_archived(tmp_path: Path) -> None:
    archive = tmp_path / "responses.sqlite"
    with FakePerspective(key=KEY) as server:
        s = scorer(server, archive=str(archive), languages="any")
        s.score(["good text", "bad lang text"], ["en", "sw"])
        s.close()
    db = sqlite3.connect(archive)
    rows = db.execute("select status, lang_sent, body, endpoint from responses").fetchall()
    assert sorted(r[0] for r in rows) == [200, 400]
    ok = next(r for r in rows if r[0] == 200)
    assert json.loads(ok[2])["detectedLanguages"] == ["en"] and ok[1] == "en"
    assert ok[3] == server.url + "/v1alpha1/comments:analyze"


def test_parse_error_reads_google_error_bodies() -> None:
    details = [{"@type": "x", "errorType": "COMMENT_EMPTY"}]
    body = json.dumps({"error": {"code": 400, "message": "Comment must be non-empty.",
                                 "status": "INVALID_ARGUMENT", "details": details}}).encode()
    assert parse_error(body) == ("COMMENT_EMPTY", "Comment must be non-empty.")
    assert parse_error(b"<html>oops</html>")[0] == "UNKNOWN"


def test_token_bucket_spaces_calls_evenly() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    bucket = AdaptiveTokenBucket(10.0, clock=lambda: now[0], sleep=sleep)
    waits = [bucket.acquire() for _ in range(5)]
    assert waits[0] == 0.0 and waits[1:] == pytest.approx([0.1, 0.1, 0.1, 0.1])
    bucket.on_throttled()
    assert bucket.rate == pytest.approx(10.0)  # a lone 429 is jitter: no slow-down
    bucket.on_throttled()
    assert bucket.rate == pytest.approx(9.0)  # a second one within 20 requests: slow down
    for _ in range(400):
        bucket.on_success()
    assert bucket.rate == pytest.approx(10.0)


class _Echo:
    """A loopback server that echoes the request URL (key included) in every answer: 200s (in a field and
    in a bad value), 400s and 500s, raw and percent-encoded."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import quote

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                text = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["comment"]["text"]
                echo = f"{self.path} {quote(self.path, safe='')}"
                value: object = 0.25
                status, body = 200, {"attributeScores": {"TOXICITY": {"summaryScore": {"value": value}}},
                                     "echo": echo}
                if text == "bad value":
                    body["attributeScores"] = {"TOXICITY": {"summaryScore": {"value": echo}}}
                elif text == "refused":
                    status, body = 400, {"error": {"code": 400, "message": f"bad request {echo}",
                                                   "status": "INVALID_ARGUMENT"}}
                elif text == "broken":
                    status, body = 500, {"error": {"code": 500, "message": echo, "status": f"INTERNAL {echo}"}}
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_key_echoed_by_the_server_is_redacted_everywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from urllib.parse import quote, quote_plus

    secret = "k3y+with/odd=chars-9d2e"
    monkeypatch.setenv("PERSPECTIVE_API_KEY", secret)
    echo = _Echo()
    try:
        s = build_scorer("perspective", {"url": echo.url, "qps": "100", "max_attempts": "1", "backoff": "0",
                                         "cache": str(tmp_path / "c.sqlite"), "archive": str(tmp_path / "a.sqlite")})
        scores = s.score(["fine", "bad value", "refused", "broken"], ["en"] * 4)
        s.close()
    finally:
        echo.close()
    assert scores[0].ok and [sc.ok for sc in scores[1:]] == [False, False, False]
    forms = {secret, quote(secret, safe=""), quote_plus(secret)}
    for score in scores[1:]:
        assert score.error is not None and not any(f in score.error for f in forms), score.error
    assert "***" in (scores[2].error or "")  # the 400's message quoted the URL: redacted, not dropped
    for file in tmp_path.iterdir():
        data = file.read_bytes()
        assert not any(f.encode() in data for f in forms), file
    db = sqlite3.connect(tmp_path / "a.sqlite")
    bodies = [row[0] for row in db.execute("SELECT body FROM responses")]
    db.close()
    assert len(bodies) == 3 and all("***" in b for b in bodies)  # 200, bad-value 200 and 400 archived


def test_no_store_archives_nothing_and_caches_nothing(tmp_path: Path) -> None:
    from polytox.scoring.storing import no_store

    with FakePerspective(key=KEY) as server:
        s = build_scorer("perspective", {"url": server.url, "qps": "200", "cache": str(tmp_path / "c.sqlite"),
                                         "archive": str(tmp_path / "a.sqlite")})
        with no_store():
            first = s.score(["kept nowhere", "you idiot"], ["en", "en"])
        db = sqlite3.connect(tmp_path / "a.sqlite")
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 0
        assert len(s.cache) == 0  # type: ignore[attr-defined]
        again = s.score(["kept nowhere"], ["en"])
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == 1
        db.close()
        assert len(s.cache) == 1  # type: ignore[attr-defined]
        s.close()
    assert all(sc.ok for sc in first) and again[0].values == first[0].values
    assert server.count() == 3  # nothing was cached under no_store, so the second call asked again
