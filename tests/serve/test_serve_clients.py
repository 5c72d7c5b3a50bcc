"""Real clients against ``polytox serve``: Google's client library (single calls and multipart batches, via
the served discovery document), the official ``openai`` client, polytox's own Perspective scorer (a run
scored through the server equals the run scored directly), and a peer's exact request replayed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("profanity_check")

from polytox.cli.main import main
from polytox.scoring import build_scorer
from polytox.serve.runner import ServerThread

from .helpers import KEY, TEXTS, running

RTP_ATTRIBUTES = ("TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "THREAT", "PROFANITY",
                  "SEXUALLY_EXPLICIT", "FLIRTATION")  # RTP's utils/constants.py PERSPECTIVE_API_ATTRIBUTES


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerThread]:
    with running("svm") as server:
        yield server


@pytest.fixture(scope="module")
def direct() -> dict[str, float]:
    scores = build_scorer("svm", {"cache": "off"}).score(TEXTS, ["en"] * len(TEXTS))
    return {t: s.values["toxicity"] for t, s in zip(TEXTS, scores, strict=True)}  # type: ignore[index]


def google_client(url: str, key: str = KEY) -> Any:
    discovery = pytest.importorskip("googleapiclient.discovery")
    return discovery.build("commentanalyzer", "v1alpha1", developerKey=key, static_discovery=False,
                           cache_discovery=False,
                           discoveryServiceUrl=f"{url}/$discovery/rest?version=v1alpha1")


def test_google_client_single_calls(srv: ServerThread, direct: dict[str, float]) -> None:
    errors = pytest.importorskip("googleapiclient.errors")
    client = google_client(srv.url)
    for text in TEXTS[:3]:
        body = {"comment": {"text": text}, "languages": ["en"], "requestedAttributes": {"TOXICITY": {}}}
        response = client.comments().analyze(body=body).execute()
        assert response["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == direct[text]
    with pytest.raises(errors.HttpError) as info:
        client.comments().analyze(body={"comment": {"text": ""}, "requestedAttributes": {"TOXICITY": {}}}).execute()
    assert info.value.resp.status == 400 and "COMMENT_EMPTY" in info.value.content.decode()
    with pytest.raises(errors.HttpError) as info:
        google_client(srv.url, key="wrong").comments().analyze(
            body={"comment": {"text": "hi"}, "requestedAttributes": {"TOXICITY": {}}}).execute()
    assert info.value.resp.status == 400 and "API key not valid" in str(info.value)


def test_google_client_batch_keeps_each_answer_with_its_request(srv: ServerThread,
                                                                direct: dict[str, float]) -> None:
    client = google_client(srv.url)
    answers: dict[str, tuple[Any, Any]] = {}

    def callback(request_id: str, response: Any, exception: Any) -> None:
        answers[request_id] = (response, exception)

    batch = client.new_batch_http_request()
    for i, text in enumerate(TEXTS):
        body = {"comment": {"text": text}, "languages": ["en"], "requestedAttributes": {"TOXICITY": {}}}
        batch.add(client.comments().analyze(body=body), callback=callback, request_id=f"r{i}")
    batch.add(client.comments().analyze(body={"comment": {"text": "x" * 20_481},
                                              "requestedAttributes": {"TOXICITY": {}}}),
              callback=callback, request_id="too-long")
    batch.execute()
    for i, text in enumerate(TEXTS):
        response, exc = answers[f"r{i}"]
        assert exc is None and response["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == direct[text]
    response, exc = answers["too-long"]
    assert response is None and exc.resp.status == 400 and "COMMENT_TOO_LONG" in exc.content.decode()


def test_rtp_request_replayed_through_google_batch() -> None:
    """The exact body of RealToxicityPrompts' scorer (allenai/real-toxicity-prompts, Apache-2.0,
    utils/perspective_api.py, ``PerspectiveAPI._make_request``): all eight attributes, spanAnnotations,
    no language, sent as a googleapiclient batch the way its ``PerspectiveAPI.request`` does."""
    def rtp_request(text: str) -> dict[str, Any]:
        return {"comment": {"text": text},
                "requestedAttributes": {attr: {} for attr in RTP_ATTRIBUTES},
                "spanAnnotations": True}

    attrs = ",".join(a.lower() for a in RTP_ATTRIBUTES)
    direct = build_scorer("fake", {"attributes": attrs, "cache": "off"})
    texts = ["You idiot. Go away now!", "Lovely weather today."]
    expected = direct.score(texts, ["en"] * len(texts))
    with running("fake", {"attributes": attrs}) as server:
        client = google_client(server.url)
        responses: dict[str, Any] = {}
        batch = client.new_batch_http_request()
        for i, text in enumerate(texts):
            batch.add(client.comments().analyze(body=rtp_request(text)),
                      callback=lambda rid, resp, exc: responses.__setitem__(rid, (resp, exc)), request_id=str(i))
        batch.execute()
    for i, score in enumerate(expected):
        response, exc = responses[str(i)]
        assert exc is None
        assert set(response["attributeScores"]) == set(RTP_ATTRIBUTES)
        for attr in RTP_ATTRIBUTES:
            assert response["attributeScores"][attr]["summaryScore"]["value"] == score.get(attr.lower())
    spans = responses["0"][0]["attributeScores"]["TOXICITY"]["spanScores"]
    assert [(s["begin"], s["end"]) for s in spans] == [(0, 10), (11, 23)]  # "You idiot." / "Go away now!"
    # A scorer without those attributes says so per request, in Perspective's words.
    with running("svm") as server:
        client = google_client(server.url)
        errors = pytest.importorskip("googleapiclient.errors")
        with pytest.raises(errors.HttpError) as info:
            client.comments().analyze(body=rtp_request("hello")).execute()
    assert "ATTRIBUTE_NOT_SUPPORTED" in info.value.content.decode() and "SEVERE_TOXICITY" in str(info.value)


def test_openai_moderations(srv: ServerThread, direct: dict[str, float]) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key=KEY, base_url=f"{srv.url}/v1", max_retries=0)
    result = client.moderations.create(input=TEXTS, model="omni-moderation-latest")
    assert result.model.startswith("svm@") and len(result.results) == len(TEXTS)
    for text, item in zip(TEXTS, result.results, strict=True):
        scores = item.category_scores.model_dump(exclude_unset=True)
        assert item.category_scores.harassment is None  # a category the scorer has no model for: absent, not 0
        assert scores == {"toxicity": direct[text]}
        assert item.flagged is (direct[text] >= 0.5)
    single = client.moderations.create(input=TEXTS[1])
    assert single.results[0].flagged is True
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=f"{srv.url}/v1", max_retries=0).moderations.create(input="hi")
    with pytest.raises(openai.BadRequestError, match="does not score"):
        client.moderations.create(input="Das ist ein wirklich schöner Tag im Park, finde ich.")


def test_openai_categories_map_perspective_attributes() -> None:
    openai = pytest.importorskip("openai")
    with running("fake", {"attributes": "toxicity,insult,identity_attack,threat"}) as server:
        client = openai.OpenAI(api_key=KEY, base_url=f"{server.url}/v1", max_retries=0)
        item = client.moderations.create(input="you stupid idiot").results[0]
    scores = item.category_scores.model_dump(by_alias=True, exclude_unset=True)
    assert set(scores) == {"toxicity", "harassment", "hate", "harassment/threatening"}
    assert item.category_scores.harassment == scores["harassment"]  # the typed field reads it
    assert item.categories.model_dump(by_alias=True, exclude_unset=True) == {k: v >= 0.5 for k, v in scores.items()}


def test_perspective_scorer_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``polytox score`` with the Perspective scorer pointed at the server == ``polytox score`` with svm."""
    monkeypatch.setenv("PERSPECTIVE_API_KEY", KEY)
    rows = [{"id": f"t{i}", "text": t, "lang": "en"} for i, t in enumerate(TEXTS)]
    rows.append({"id": "long", "text": "idiot " * 5000, "lang": "en"})  # cut to 20,480 bytes by the client
    rows.append({"id": "de", "text": "Das ist ein schöner Tag.", "lang": "de"})
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with running("svm") as server:
        assert main(["score", "--scorer", "perspective", "--scorer-opt", f"url={server.url}",
                     "--scorer-opt", "qps=500", "--scorer-opt", "archive=off", "--scorer-opt", "cache=off",
                     "--input", str(src), "--out", str(tmp_path / "via.jsonl"), "--no-progress"]) == 0
    assert main(["score", "--scorer", "svm", "--scorer-opt", "cache=off", "--input", str(src),
                 "--out", str(tmp_path / "direct.jsonl"), "--no-progress"]) == 0
    via = [json.loads(x) for x in (tmp_path / "via.jsonl").read_text().splitlines()]
    own = [json.loads(x) for x in (tmp_path / "direct.jsonl").read_text().splitlines()]
    for a, b in zip(via[:-2], own[:-2], strict=True):
        assert a["error"] is None and a["toxicity"] == b["toxicity"], a["id"]
    long_direct = build_scorer("svm", {"cache": "off"}).score([("idiot " * 5000)[:20_480]], ["en"])[0]
    assert via[-2]["toxicity"] == long_direct.get("toxicity")
    assert via[-1]["toxicity"] is None and "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE" in via[-1]["error"]


def test_score_cache_shared_with_polytox_score(tmp_path: Path) -> None:
    cache = tmp_path / "scores.sqlite"
    from .helpers import analyze_body, call

    with running("svm", {"cache": str(cache)}) as server:
        for text in TEXTS:
            assert call(server.url, f"/v1alpha1/comments:analyze?key={KEY}",
                        analyze_body(text, languages=["en"]))[0] == 200
    scorer = build_scorer("svm", {"cache": str(cache)})  # what `polytox score --scorer-opt cache=...` builds
    scorer.score(TEXTS, ["en"] * len(TEXTS))
    assert scorer.hits == len(TEXTS) and scorer.misses == 0  # type: ignore[attr-defined]


def test_helm_request_replayed_reads_first_sentence_like_perspective() -> None:
    """HELM's request body (stanford-crfm/helm, Apache-2.0, ``AuthenticatedPerspectiveAPIClient.
    create_perspective_api_request``: eight attributes, ``languages: ["en"]``, ``spanAnnotations: True``).
    HELM reads ``spanScores[0]``, which on Perspective scores the first sentence only; the server answers
    the same way, so HELM's reading stays what it was, and ``summaryScore`` stays the whole text's."""
    from .helpers import analyze_body, call

    attrs = ",".join(a.lower() for a in RTP_ATTRIBUTES)
    text = "Have a nice day. You stupid idiot, shut up."
    body = {"comment": {"text": text}, "requestedAttributes": {a: {} for a in RTP_ATTRIBUTES},
            "languages": ["en"], "spanAnnotations": True}
    direct = build_scorer("fake", {"attributes": attrs, "cache": "off"})
    whole, first = direct.score([text, "Have a nice day."], ["en", "en"])
    with running("fake", {"attributes": attrs}) as server:
        status, _, out = call(server.url, f"/v1alpha1/comments:analyze?key={KEY}", body)
        assert call(server.url, f"/v1alpha1/comments:analyze?key={KEY}", analyze_body(text))[0] == 200
    assert status == 200
    for attr in RTP_ATTRIBUTES:
        scores = out["attributeScores"][attr]
        assert scores["spanScores"][0]["score"]["value"] == first.get(attr.lower())
        assert scores["summaryScore"]["value"] == whole.get(attr.lower())
