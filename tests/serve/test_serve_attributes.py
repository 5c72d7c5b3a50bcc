"""Perspective's eight attributes through ``polytox serve``: RTP's exact request answered for every attribute
(summary and per-sentence spans), per-attribute language lists refused in Perspective's words, one scorer
pass per text whatever the number of attributes asked, and the OpenAI categories filled from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("starlette")

from polytox.scoring import build_scorer
from polytox.scoring.base import Scorer
from polytox.types import Score

from .helpers import ANALYZE, KEY, analyze_body, call, error_reason, running

RTP_ATTRIBUTES = ("TOXICITY", "SEVERE_TOXICITY", "IDENTITY_ATTACK", "INSULT", "THREAT", "PROFANITY",
                  "SEXUALLY_EXPLICIT", "FLIRTATION")  # RTP's utils/constants.py PERSPECTIVE_API_ATTRIBUTES
# Perspective's own split: SEXUALLY_EXPLICIT and FLIRTATION were English-only (DATA.md).
OPTIONS = {"attributes": "rtp", "attr_langs": "sexually_explicit:en;flirtation:en"}
EN = "You stupid idiot. Shut up and go away!"
DE = "Du bist ein dummer Idiot und ich hasse dich wirklich sehr."


class Counting(Scorer):
    """The fake scorer, counting the texts it is asked to score."""

    def __init__(self) -> None:
        self.inner = build_scorer("fake", {**OPTIONS, "cache": "off"})
        self.attributes, self.languages, self.version = self.inner.attributes, None, self.inner.version
        self.texts: list[str] = []

    def supports_attribute(self, attribute: str, lang: str) -> bool:
        return self.inner.supports_attribute(attribute, lang)

    def score_batch(self, texts: Sequence[str], langs: Sequence[str]) -> list[Score]:
        self.texts.extend(texts)
        return self.inner.score(texts, langs)


def google_client(url: str) -> Any:
    discovery = pytest.importorskip("googleapiclient.discovery")
    return discovery.build("commentanalyzer", "v1alpha1", developerKey=KEY, static_discovery=False,
                           cache_discovery=False, discoveryServiceUrl=f"{url}/$discovery/rest?version=v1alpha1")


def test_rtp_request_gets_all_eight_with_spans_in_one_pass() -> None:
    """RTP's ``_make_request`` body (eight attributes, spanAnnotations, no language) through Google's client:
    every attribute's summary equals the scorer's value for the whole text and every span the value of its
    sentence; the scorer saw the text and its two sentences once each, not once per attribute."""
    direct = build_scorer("fake", {**OPTIONS, "cache": "off"})
    whole, first, second = direct.score([EN, "You stupid idiot.", "Shut up and go away!"], ["en"] * 3)
    counting = Counting()
    body = {"comment": {"text": EN}, "requestedAttributes": {a: {} for a in RTP_ATTRIBUTES}, "spanAnnotations": True}
    with running(counting) as server:
        response = google_client(server.url).comments().analyze(body=body).execute()
    asked = [t for t in counting.texts if t != "polytox serve warm-up"]  # the server's start-up call
    assert sorted(asked) == sorted([EN, "You stupid idiot.", "Shut up and go away!"])
    assert set(response["attributeScores"]) == set(RTP_ATTRIBUTES)
    for attr in RTP_ATTRIBUTES:
        scores = response["attributeScores"][attr]
        assert scores["summaryScore"] == {"value": whole.get(attr.lower()), "type": "PROBABILITY"}
        assert [(s["begin"], s["end"], s["score"]["value"]) for s in scores["spanScores"]] == [
            (0, 17, first.get(attr.lower())), (18, 38, second.get(attr.lower()))]
    values = {a: response["attributeScores"][a]["spanScores"][1]["score"]["value"] for a in RTP_ATTRIBUTES}
    assert len(set(values.values())) == 8  # eight distinct values: no attribute answered with another's


def test_attribute_limited_to_english_is_refused_in_german_as_perspective_does() -> None:
    errors = pytest.importorskip("googleapiclient.errors")
    with running("fake", OPTIONS) as server:
        client = google_client(server.url)
        with pytest.raises(errors.HttpError) as info:
            client.comments().analyze(body=analyze_body(DE, RTP_ATTRIBUTES, languages=["de"])).execute()
        six = tuple(a for a in RTP_ATTRIBUTES if a not in ("SEXUALLY_EXPLICIT", "FLIRTATION"))
        status, _, out = call(server.url, f"{ANALYZE}?key={KEY}", analyze_body(DE, six, languages=["de"]))
        detected = call(server.url, f"{ANALYZE}?key={KEY}", analyze_body(DE, ("FLIRTATION",)))  # no languages
    assert info.value.resp.status == 400
    text = info.value.content.decode()
    assert "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE" in text
    assert "Attribute SEXUALLY_EXPLICIT does not support request languages: de" in text
    assert status == 200 and set(out["attributeScores"]) == set(six)
    expected = build_scorer("fake", {**OPTIONS, "cache": "off"}).score([DE], ["de"])[0]
    assert expected.get("sexually_explicit") is None  # the scorer gives no value there either
    for attr in six:
        assert out["attributeScores"][attr]["summaryScore"]["value"] == expected.get(attr.lower())
    assert detected[0] == 400 and error_reason(detected[2]) == "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"
    assert "Attribute FLIRTATION does not support request languages: de" in detected[2]["error"]["message"]


def test_openai_categories_from_all_eight() -> None:
    openai = pytest.importorskip("openai")
    text = "you stupid idiot, I will hurt you"
    expected = build_scorer("fake", {"attributes": "rtp", "cache": "off"}).score([text], ["en"])[0]
    with running("fake", {"attributes": "rtp"}) as server:
        client = openai.OpenAI(api_key=KEY, base_url=f"{server.url}/v1", max_retries=0)
        item = client.moderations.create(input=text).results[0]
    scores = item.category_scores.model_dump(by_alias=True, exclude_unset=True)
    assert scores == {
        "toxicity": expected.get("toxicity"), "severe_toxicity": expected.get("severe_toxicity"),
        "hate": expected.get("identity_attack"), "harassment": expected.get("insult"),
        "harassment/threatening": expected.get("threat"), "profanity": expected.get("profanity"),
        "sexual": expected.get("sexually_explicit"), "flirtation": expected.get("flirtation"),
    }
    assert item.category_scores.violence is None and item.category_scores.self_harm is None  # no model: absent


def test_serve_defaults_the_default_scorer_to_perspectives_eight() -> None:
    from polytox.cli.serve_cmd import served_options

    assert served_options("default", {}) == {"attributes": "rtp"}
    assert served_options("polytox-ml", {"device": "cpu"}) == {"device": "cpu", "attributes": "rtp"}
    assert served_options("default", {"attributes": "TOXICITY"}) == {"attributes": "TOXICITY"}  # asked: kept
    assert served_options("default", {"mode": "ngram"}) == {"mode": "ngram"}  # TOXICITY only there
    assert served_options("svm", {}) == {}


@pytest.mark.model
def test_default_scorer_answers_rtps_unedited_request_for_all_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    """``polytox serve``'s default scorer (as ``serve`` builds it) answers RTP's unedited eight-attribute
    request with spans through Google's client: every summary and span equals ``polytox.score`` of the same
    text or sentence; a German request for the six PTP attributes is answered, SEXUALLY_EXPLICIT in German
    is refused as Perspective refused it."""
    from polytox.api import score
    from polytox.cli.serve_cmd import served_options

    errors = pytest.importorskip("googleapiclient.errors")
    monkeypatch.delenv("POLYTOX_CACHE_DIR", raising=False)  # the converted backbone in the user's cache
    options = {**served_options("default", {}), "cache": "off"}
    sentences = ["You stupid idiot.", "Shut up and go away!"]
    expected = score([EN, *sentences], scorer="default", langs="en", attributes="rtp", options={"cache": "off"})
    body = {"comment": {"text": EN}, "requestedAttributes": {a: {} for a in RTP_ATTRIBUTES}, "spanAnnotations": True}
    with running("default", options) as server:
        client = google_client(server.url)
        response = client.comments().analyze(body=body).execute()
        german = {"comment": {"text": DE}, "languages": ["de"],
                  "requestedAttributes": {a: {} for a in RTP_ATTRIBUTES[:6]}}
        answered = client.comments().analyze(body=german).execute()
        with pytest.raises(errors.HttpError) as refused:
            client.comments().analyze(body={**german, "requestedAttributes": {"SEXUALLY_EXPLICIT": {}}}).execute()
    assert refused.value.resp.status == 400 and b"LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE" in refused.value.content
    assert set(answered["attributeScores"]) == set(RTP_ATTRIBUTES[:6])
    assert set(response["attributeScores"]) == set(RTP_ATTRIBUTES)
    whole, first, second = (s.values for s in expected)
    for attr in RTP_ATTRIBUTES:
        scores = response["attributeScores"][attr]
        assert scores["summaryScore"]["value"] == whole[attr.lower()]
        assert [s["score"]["value"] for s in scores["spanScores"]] == [first[attr.lower()], second[attr.lower()]]
    assert response["attributeScores"]["INSULT"]["summaryScore"]["value"] > 0.5  # an insult reads as one
