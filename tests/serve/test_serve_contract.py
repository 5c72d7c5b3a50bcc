"""The Perspective contract of ``polytox serve``: answers, the scorer header, and every error in Google's
shape with Perspective's reasons (served by the real svm scorer over real HTTP on 127.0.0.1)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("profanity_check")

from polytox.scoring import build_scorer
from polytox.serve.runner import ServerThread

from .helpers import ANALYZE, KEY, TEXTS, analyze_body, call, error_reason, running

PATH = f"{ANALYZE}?key={KEY}"
GOOD = b'{"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": {}}, "languages": ["en"]}'


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerThread]:
    with running("svm", max_body_bytes=64 * 1024, access_log=True) as server:
        yield server


@pytest.fixture(scope="module")
def direct() -> dict[str, float]:
    scorer = build_scorer("svm", {"cache": "off"})
    scores = scorer.score(TEXTS, ["en"] * len(TEXTS))
    return {t: s.values["toxicity"] for t, s in zip(TEXTS, scores, strict=True)}  # type: ignore[index]


def test_summary_scores_equal_the_scorer_exactly(srv: ServerThread, direct: dict[str, float]) -> None:
    for text in TEXTS:
        status, headers, body = call(srv.url, PATH, analyze_body(text, languages=["en"], doNotStore=True,
                                                                  clientToken="tok-1"))
        assert status == 200, body
        summary = body["attributeScores"]["TOXICITY"]["summaryScore"]
        assert summary == {"value": direct[text], "type": "PROBABILITY"}
        assert body["languages"] == ["en"] and body["detectedLanguages"] == ["en"]
        assert body["clientToken"] == "tok-1"
        assert headers["x-polytox-scorer"].startswith("svm@alt-profanity-check-")
    assert direct[TEXTS[1]] > 0.9 > 0.2 > direct[TEXTS[0]]


def test_language_detected_when_omitted(srv: ServerThread, direct: dict[str, float]) -> None:
    status, _, body = call(srv.url, PATH, analyze_body(TEXTS[1]))
    assert status == 200
    assert body["languages"] == ["en"] and body["detectedLanguages"] == ["en"]
    assert body["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == direct[TEXTS[1]]


def test_an_unsupported_detected_language_is_a_400_naming_it(srv: ServerThread) -> None:
    swahili = "Habari za asubuhi, rafiki yangu. Natumaini siku yako itakuwa nzuri sana leo."
    status, _, body = call(srv.url, PATH, analyze_body(swahili))
    assert status == 400, body
    assert error_reason(body) == "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"
    assert "does not support request languages: sw" in body["error"]["message"]


def test_span_annotations_score_each_sentence(srv: ServerThread, direct: dict[str, float]) -> None:
    text = f"{TEXTS[0]} {TEXTS[1]}"
    status, _, body = call(srv.url, PATH, analyze_body(text, spanAnnotations=True, languages=["en"]))
    assert status == 200
    spans = body["attributeScores"]["TOXICITY"]["spanScores"]
    assert [(s["begin"], s["end"]) for s in spans] == [(0, len(TEXTS[0])), (len(TEXTS[0]) + 1, len(text))]
    assert [s["score"]["value"] for s in spans] == [direct[TEXTS[0]], direct[TEXTS[1]]]
    whole = body["attributeScores"]["TOXICITY"]["summaryScore"]["value"]
    assert whole not in (direct[TEXTS[0]], direct[TEXTS[1]])  # the summary scores the whole text


def test_span_annotations_refused_when_off() -> None:
    with running("svm", span_annotations=False) as server:
        status, _, body = call(server.url, PATH, analyze_body("hello there", spanAnnotations=True))
    assert status == 400 and "spanAnnotations is not supported" in body["error"]["message"]
    assert body["error"]["status"] == "INVALID_ARGUMENT"


def test_score_threshold_leaves_out_low_scores(srv: ServerThread) -> None:
    body = analyze_body(TEXTS[0])
    body["requestedAttributes"] = {"TOXICITY": {"scoreThreshold": 0.9}}
    status, _, out = call(srv.url, PATH, body)
    assert status == 200 and out["attributeScores"] == {}


@pytest.mark.parametrize(("body", "reason", "needle"), [
    (analyze_body("   "), "COMMENT_EMPTY", "non-empty"),
    ({"requestedAttributes": {"TOXICITY": {}}}, "COMMENT_EMPTY", "comment"),
    (analyze_body("x" * 20_481), "COMMENT_TOO_LONG", "20481 bytes"),
    (analyze_body("é" * 10_241), "COMMENT_TOO_LONG", "20482 bytes"),
    (analyze_body("hello", ("TOXICITY", "SEVERE_TOXICITY")), "ATTRIBUTE_NOT_SUPPORTED", "SEVERE_TOXICITY"),
    (analyze_body("hello", ("NOT_AN_ATTRIBUTE",)), "ATTRIBUTE_NOT_SUPPORTED", "is unknown"),
    (analyze_body("hello", languages=["de"]), "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE", "de"),
    (analyze_body("hello", languages=["xx-nonsense"]), "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE", "xx-nonsense"),
    (analyze_body("Das ist ein schöner Tag im Park, wirklich."), "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE", "de"),
    ({"comment": {"text": "hi"}}, None, "requestedAttributes is required"),
    ({**analyze_body("hi"), "bogus": 1}, None, 'Unknown name "bogus"'),
    ([1, 2], None, "Expected an object"),
    (analyze_body("hi", languages="en"), None, "languages"),
])
def test_errors_in_google_shape(srv: ServerThread, body: object, reason: str | None, needle: str) -> None:
    status, headers, out = call(srv.url, PATH, body)
    assert status == 400, out
    assert out["error"]["code"] == 400 and out["error"]["status"] == "INVALID_ARGUMENT"
    assert error_reason(out) == reason
    assert needle in out["error"]["message"]
    assert headers["content-type"].startswith("application/json")


def test_20480_bytes_is_still_accepted(srv: ServerThread) -> None:
    status, _, body = call(srv.url, PATH, analyze_body("word " * 4096, languages=["en"]))
    assert status == 200, body


@pytest.mark.parametrize(("raw", "content_type", "needle"), [
    (b'{"comment": {"text": "hi"', "application/json", "Invalid JSON payload"),
    (b"comment=hi", "application/x-www-form-urlencoded", "Content-Type must be application/json"),
    (b'{"comment": {"text": "caf\xe9"}, "requestedAttributes": {"TOXICITY": {}}}', "application/json",
     "Invalid UTF-8 at byte 25"),
    (b'{"comment": {"text": "a\x00b"}, "requestedAttributes": {"TOXICITY": {}}}', "application/json",
     "Invalid control character"),
    (b'{"comment": {"text": "\\ud800"}, "requestedAttributes": {"TOXICITY": {}}}', "application/json",
     "not valid UTF-8"),
    (GOOD, "", "Content-Type is missing"),
    (GOOD, " ", "Content-Type is missing"),
    (GOOD, None, "Content-Type is missing"),
    (GOOD, "application/json; charset=utf-16", "charset=utf-16 is not supported"),
    (b'{"comment": {"text": "hi"}, "comment": {"text": "you idiot"}, "requestedAttributes": {"TOXICITY": {}}}',
     "application/json", 'Duplicate key "comment"'),
    (b'{"comment": {"text": "hi", "text": "x"}, "requestedAttributes": {"TOXICITY": {}}}', "application/json",
     'Duplicate key "text"'),
    (b'{"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": []}}', "application/json",
     "'requestedAttributes.TOXICITY' (TYPE_MESSAGE): expected an object"),
    (b'{"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": null}}', "application/json",
     "'requestedAttributes.TOXICITY' (TYPE_MESSAGE): expected an object"),
    (b'{"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": {"scoreTreshold": 0.5}}}', "application/json",
     'Unknown name "scoreTreshold" at \'requestedAttributes.TOXICITY\''),
])
def test_bad_bodies(srv: ServerThread, raw: bytes, content_type: str | None, needle: str) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    status, _, out = call(srv.url, PATH, raw=raw, headers=headers)
    assert status == 400, out
    assert out["error"]["status"] == "INVALID_ARGUMENT" and needle in out["error"]["message"], out


@pytest.mark.parametrize("content_type", ["application/json; charset=UTF-8", 'application/json; charset="utf-8"',
                                          "application/json"])
def test_utf8_content_types_are_accepted(srv: ServerThread, content_type: str) -> None:
    status, _, out = call(srv.url, PATH, raw=GOOD, headers={"Content-Type": content_type})
    assert status == 200, out


def test_body_over_the_limit_is_413(srv: ServerThread) -> None:
    status, _, out = call(srv.url, PATH, raw=b"x" * (64 * 1024 + 1), headers={"Content-Type": "application/json"})
    assert status == 413, out
    assert "Request payload size exceeds the limit: 65536 bytes" in out["error"]["message"]


def test_chunked_body_over_the_limit_is_413_not_a_reset(srv: ServerThread) -> None:
    """No Content-Length: the limit is enforced while reading the stream, and the rest of the body is read
    and dropped, so the client gets the 413 instead of a connection reset (3 MB here; 30 MB against the
    default 1 MiB limit is the same path)."""
    import socket

    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * 65536
        for _ in range(48):
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
        reply = _read_response(sock)
    assert reply.startswith("HTTP/1.1 413") and "Request payload size exceeds the limit: 65536 bytes" in reply
    assert call(srv.url, PATH, analyze_body("still here", languages=["en"]))[0] == 200


def test_header_over_16_kib_is_431_not_a_reset(srv: ServerThread) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 200_000}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".encode())
        reply = _read_response(sock)
    assert reply.startswith("HTTP/1.1 431 Request Header Fields Too Large"), reply[:200]
    assert '"code": 431' in reply and "the limit is 16384 bytes" in reply
    assert call(srv.url, PATH, analyze_body("still here", languages=["en"]))[0] == 200


def test_request_larger_than_the_queue_is_a_400_naming_the_limit(srv: ServerThread) -> None:
    """5,000 sentences with spanAnnotations need 5,001 scorer inputs, more than the queue (1,024) ever
    holds: a 400 that names the limit, not a 503 a client would retry forever."""
    body = analyze_body("No. " * 5000, languages=["en"], spanAnnotations=True)
    status, headers, out = call(srv.url, PATH, body)
    assert status == 400, out
    assert "retry-after" not in headers
    assert "5001 scorer inputs" in out["error"]["message"] and "--max-queue 1024" in out["error"]["message"]
    status, _, out = call(srv.url, PATH, analyze_body("No. " * 5000, languages=["en"]))  # no spans: one input
    assert status == 200, out


def test_escaped_nul_is_scored_like_any_character(srv: ServerThread) -> None:
    """A NUL escaped in JSON (\\u0000) is a valid character: scored, not an error, not a crash."""
    status, _, body = call(srv.url, PATH, analyze_body("you idiot\u0000 really", languages=["en"]))
    assert status == 200
    assert 0.0 <= body["attributeScores"]["TOXICITY"]["summaryScore"]["value"] <= 1.0


def test_huge_body_refused_by_content_length_without_reading_it(srv: ServerThread) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {1 << 30}\r\n\r\n".encode())
        reply = _read_response(sock)
    assert reply.startswith("HTTP/1.1 413") and "Request payload size exceeds the limit" in reply


def _read_response(sock: Any) -> str:
    """One whole HTTP response: headers and body may arrive in separate packets."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data.decode()
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return (head + b"\r\n\r\n" + body).decode()


def test_keys(srv: ServerThread) -> None:
    status, _, out = call(srv.url, ANALYZE, analyze_body("hello"))
    assert status == 403 and out["error"]["status"] == "PERMISSION_DENIED"
    status, _, out = call(srv.url, f"{ANALYZE}?key=wrong", analyze_body("hello"))
    assert status == 400 and error_reason(out) == "API_KEY_INVALID"  # as Google answers a bad key
    with running("svm", keys=(), open_access=True) as server:
        assert call(server.url, ANALYZE, analyze_body("hello", languages=["en"]))[0] == 200


def test_key_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-very-secret-0042"
    with caplog.at_level(logging.INFO, logger="polytox.serve"), \
            running("svm", keys=(secret,), access_log=True) as server:
        assert call(server.url, f"{ANALYZE}?key={secret}", analyze_body("hello", languages=["en"]))[0] == 200
        assert call(server.url, f"{ANALYZE}?key={secret}x", analyze_body("hello"))[0] == 400
    assert any("comments:analyze 200" in r.getMessage() for r in caplog.records)  # the access log ran
    assert all(secret not in r.getMessage() for r in caplog.records)


def test_unknown_route_and_method(srv: ServerThread) -> None:
    status, _, out = call(srv.url, "/v1alpha1/comments:suggestscore", analyze_body("hi"))
    assert status == 404 and out["error"]["status"] == "NOT_FOUND"
    status, _, out = call(srv.url, PATH, method="GET")
    assert status == 405 and out["error"]["code"] == 405


def test_healthz_and_metrics(srv: ServerThread) -> None:
    status, headers, body = call(srv.url, "/healthz", method="GET")
    assert status == 200 and body["status"] == "ok" and body["scorer"] == headers["x-polytox-scorer"]
    call(srv.url, PATH, analyze_body("   "))
    status, _, text = call(srv.url, "/metrics", method="GET")
    metrics = text.decode()
    assert status == 200
    assert 'polytox_serve_requests_total{code="200",endpoint="analyze"}' in metrics
    assert 'polytox_serve_errors_total{reason="COMMENT_EMPTY"}' in metrics
    assert "polytox_serve_batch_size_bucket" in metrics and "polytox_serve_request_seconds_bucket" in metrics


def test_discovery_document_points_back_here(srv: ServerThread) -> None:
    status, _, doc = call(srv.url, "/$discovery/rest?version=v1alpha1", method="GET")
    assert status == 200
    assert doc["rootUrl"] == srv.url + "/" and doc["batchPath"] == "batch"
    assert doc["resources"]["comments"]["methods"]["analyze"]["path"] == "v1alpha1/comments:analyze"
    assert call(srv.url, "/$discovery/rest?version=v1", method="GET")[0] == 404


# ---- field types and ranges, nesting depth, a client that goes away (as Perspective answers: a 400) ----------
THRESHOLD = b'{"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": {"scoreThreshold": %s}}}'


@pytest.mark.parametrize(("body", "needle"), [
    (analyze_body("hi", doNotStore="maybe"), "Invalid value at 'doNotStore' (TYPE_BOOL)"),
    (analyze_body("hi", clientToken={"a": 1}), "Invalid value at 'clientToken' (TYPE_STRING)"),
    (analyze_body("hi", sessionId=5), "Invalid value at 'sessionId' (TYPE_STRING)"),
    (analyze_body("hi", context={"entries": 5}), "Invalid value at 'context.entries' (TYPE_MESSAGE)"),
    (analyze_body("hi", context={"entries": [{"text": 5}]}), "Invalid value at 'context.entries[0]'"),
    (analyze_body("hi", spanAnnotations="yes"), "Invalid value at 'spanAnnotations' (TYPE_BOOL)"),
])
def test_field_types_are_checked(srv: ServerThread, body: object, needle: str) -> None:
    status, _, out = call(srv.url, PATH, body)
    assert status == 400 and out["error"]["status"] == "INVALID_ARGUMENT", out
    assert needle in out["error"]["message"]


@pytest.mark.parametrize(("value", "needle"), [
    (b"2", "must be a number in [0, 1], got 2"),
    (b"-0.1", "must be a number in [0, 1]"),
    (b"1e999", "must be a number in [0, 1], got inf"),
    (b"NaN", "must be a number in [0, 1], got nan"),
    (b'"high"', "(TYPE_FLOAT)"),
    (b"true", "(TYPE_FLOAT)"),
    (b"[0.5]", "(TYPE_FLOAT)"),
])
def test_score_threshold_range(srv: ServerThread, value: bytes, needle: str) -> None:
    status, _, out = call(srv.url, PATH, raw=THRESHOLD % value, headers={"Content-Type": "application/json"})
    assert status == 400 and needle in out["error"]["message"], out
    assert "requestedAttributes.TOXICITY.scoreThreshold" in out["error"]["message"]


@pytest.mark.parametrize("path", [PATH, "/v1/moderations"])
def test_deep_nesting_is_a_400_in_the_json_error_shape(srv: ServerThread, path: str) -> None:
    """30,000 levels (Python's decoder would recurse past its limit): refused before decoding."""
    raw = b'{"comment": {"text": ' + b"[" * 30_000 + b"]" * 30_000 + b"}}"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    status, got, out = call(srv.url, path, raw=raw, headers=headers)
    assert status == 400 and got["content-type"].startswith("application/json")
    assert "nested deeper than 100 levels" in out["error"]["message"]
    assert call(srv.url, PATH, analyze_body("still here", languages=["en"]))[0] == 200


def test_a_client_disconnect_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    import socket
    import time

    with caplog.at_level(logging.INFO, logger="polytox.serve"), running("svm") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 1000\r\n\r\n{\"comment\": ".encode())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("disconnected" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
        assert call(server.url, PATH, analyze_body("after", languages=["en"]))[0] == 200
    lines = [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert not any(r.exc_info or "Traceback" in r.getMessage() or "Exception in ASGI" in r.getMessage()
                   for r in caplog.records)


def test_do_not_store_writes_nothing_to_the_score_cache(tmp_path: Any) -> None:
    """doNotStore: true -> the texts (and their sentences) are scored but never written to the cache; a text
    already cached is still read from it (same value)."""
    scorer = build_scorer("svm", {"cache": str(tmp_path / "scores.sqlite")})
    with running(scorer) as server:
        private = analyze_body("Private. You idiot.", languages=["en"], doNotStore=True, spanAnnotations=True)
        status, _, out = call(server.url, PATH, private)
        assert status == 200, out
        assert len(scorer.cache) == 0  # type: ignore[attr-defined]
        status, _, stored = call(server.url, PATH, analyze_body("Public text.", languages=["en"], doNotStore=False))
        assert status == 200 and len(scorer.cache) == 1  # type: ignore[attr-defined]
        status, _, again = call(server.url, PATH, analyze_body("Public text.", languages=["en"], doNotStore=True))
        assert status == 200 and len(scorer.cache) == 1  # type: ignore[attr-defined]
        status, _, repeat = call(server.url, PATH, private)
    scorer.close()
    value = lambda body: body["attributeScores"]["TOXICITY"]["summaryScore"]["value"]  # noqa: E731
    assert value(again) == value(stored) and value(repeat) == value(out)
    assert len(out["attributeScores"]["TOXICITY"]["spanScores"]) == 2
    # warm-up 1, private 3 (text and two sentences) twice, public 1; the one hit is the cached public text
    assert (scorer.hits, scorer.misses) == (1, 1 + 3 + 1 + 3)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_30_mb_chunked_body_against_the_default_limit_is_413() -> None:
    """The probe's case at full size: 30 MB chunked against the default 1 MiB limit (drained, then 413)."""
    import socket

    with running("svm") as server, socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * (1 << 20)
        for _ in range(30):
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
        reply = _read_response(sock)
    assert reply.startswith("HTTP/1.1 413") and "exceeds the limit: 1048576 bytes" in reply
