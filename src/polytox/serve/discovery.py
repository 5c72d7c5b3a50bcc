"""The discovery document of ``commentanalyzer v1alpha1``, pointing at this server.

Code written against Google's client library builds its client from this document::

    discovery.build("commentanalyzer", "v1alpha1", developerKey=KEY, static_discovery=False,
                    discoveryServiceUrl="http://HOST:PORT/$discovery/rest?version=v1alpha1")

It declares what this server implements: ``comments.analyze`` (``POST v1alpha1/comments:analyze``) and
the multipart ``batch`` endpoint (``service.new_batch_http_request()``, used by RTP's and HELM's scoring
code). ``rootUrl`` is the address the request came to, so the client sends its requests back here.
"""

from __future__ import annotations

from typing import Any

API_NAME = "commentanalyzer"
API_VERSION = "v1alpha1"
DISCOVERY_PATHS = ("/$discovery/rest", f"/discovery/v1/apis/{API_NAME}/{API_VERSION}/rest")

_SCORE = {"type": "object", "properties": {"value": {"type": "number", "format": "float"}, "type": {"type": "string"}}}
SCHEMAS: dict[str, Any] = {
    "AnalyzeCommentRequest": {
        "id": "AnalyzeCommentRequest",
        "type": "object",
        "properties": {
            "comment": {"$ref": "TextEntry"},
            "context": {"type": "object", "additionalProperties": {"type": "any"}},
            "requestedAttributes": {"type": "object", "additionalProperties": {"$ref": "AttributeParameters"}},
            "spanAnnotations": {"type": "boolean"},
            "languages": {"type": "array", "items": {"type": "string"}},
            "doNotStore": {"type": "boolean"},
            "clientToken": {"type": "string"},
            "sessionId": {"type": "string"},
            "communityId": {"type": "string"},
        },
    },
    "TextEntry": {
        "id": "TextEntry",
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "type": {"type": "string", "enum": ["TEXT_TYPE_UNSPECIFIED", "PLAIN_TEXT", "HTML"]},
        },
    },
    "AttributeParameters": {
        "id": "AttributeParameters",
        "type": "object",
        "properties": {"scoreType": {"type": "string"}, "scoreThreshold": {"type": "number", "format": "float"}},
    },
    "AnalyzeCommentResponse": {
        "id": "AnalyzeCommentResponse",
        "type": "object",
        "properties": {
            "attributeScores": {"type": "object", "additionalProperties": {"$ref": "AttributeScores"}},
            "languages": {"type": "array", "items": {"type": "string"}},
            "detectedLanguages": {"type": "array", "items": {"type": "string"}},
            "clientToken": {"type": "string"},
        },
    },
    "AttributeScores": {
        "id": "AttributeScores",
        "type": "object",
        "properties": {
            "summaryScore": {"$ref": "Score"},
            "spanScores": {"type": "array", "items": {"$ref": "SpanScore"}},
        },
    },
    "SpanScore": {
        "id": "SpanScore",
        "type": "object",
        "properties": {
            "begin": {"type": "integer", "format": "int32"},
            "end": {"type": "integer", "format": "int32"},
            "score": {"$ref": "Score"},
        },
    },
    "Score": {"id": "Score", **_SCORE},
}

_QUERY_PARAMETERS = {
    "key": {"type": "string", "location": "query", "description": "API key (checked by polytox serve)."},
    "alt": {"type": "string", "location": "query", "default": "json", "enum": ["json"]},
    "fields": {"type": "string", "location": "query"},
    "prettyPrint": {"type": "boolean", "location": "query", "default": "true"},
    "quotaUser": {"type": "string", "location": "query"},
    "$.xgafv": {"type": "string", "location": "query", "enum": ["1", "2"]},
}


def discovery_document(root_url: str) -> dict[str, Any]:
    """The document, with ``root_url`` (``http://host:port/``) as the service address."""
    root = root_url if root_url.endswith("/") else root_url + "/"
    return {
        "kind": "discovery#restDescription",
        "discoveryVersion": "v1",
        "id": f"{API_NAME}:{API_VERSION}",
        "name": API_NAME,
        "version": API_VERSION,
        "title": "Perspective Comment Analyzer API (served by polytox)",
        "description": "Perspective's comments:analyze contract answered by a local polytox scorer.",
        "protocol": "rest",
        "rootUrl": root,
        "servicePath": "",
        "baseUrl": root,
        "batchPath": "batch",
        "parameters": _QUERY_PARAMETERS,
        "resources": {
            "comments": {
                "methods": {
                    "analyze": {
                        "id": f"{API_NAME}.comments.analyze",
                        "path": f"{API_VERSION}/comments:analyze",
                        "flatPath": f"{API_VERSION}/comments:analyze",
                        "httpMethod": "POST",
                        "parameters": {},
                        "parameterOrder": [],
                        "request": {"$ref": "AnalyzeCommentRequest"},
                        "response": {"$ref": "AnalyzeCommentResponse"},
                        "description": "Analyzes the provided text and returns scores for requested attributes.",
                    }
                }
            }
        },
        "schemas": SCHEMAS,
    }
