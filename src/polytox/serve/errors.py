"""Errors in Google's API shape, with Perspective's reasons, so old clients parse them unchanged.

``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT", "details": [{"@type":
"type.googleapis.com/google.commentanalyzer.v1alpha1.Error", "errorType": "COMMENT_EMPTY"}]}}``
(the shape the real service returns and ``scoring.perspective.parse_error`` reads).
"""

from __future__ import annotations

import math
from typing import Any

ERROR_TYPE_URL = "type.googleapis.com/google.commentanalyzer.v1alpha1.Error"
STATUS_BY_CODE = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "INVALID_ARGUMENT",
    431: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

QUOTA_MESSAGE = (
    "Quota exceeded for quota metric 'Analyze requests' and limit 'Analyze requests per minute' "
    "of service 'commentanalyzer.googleapis.com' (AnalyzeRequestsPerMinutePerProject)."
)


class ApiError(Exception):
    """An error answer: HTTP ``code``, a message and, for Perspective's own failures, its ``reason``."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.headers = headers or {}

    @property
    def label(self) -> str:
        """What the error metric counts: the reason, else the status."""
        return self.reason or STATUS_BY_CODE.get(self.code, str(self.code))

    def google_body(self) -> dict[str, Any]:
        err: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "status": STATUS_BY_CODE.get(self.code, "UNKNOWN"),
        }
        if self.reason:
            err["details"] = [{"@type": ERROR_TYPE_URL, "errorType": self.reason}]
        return {"error": err}

    def openai_body(self) -> dict[str, Any]:
        """OpenAI's error shape (``error.message/type/param/code``) for the moderation endpoint."""
        kind = {401: "authentication_error", 429: "rate_limit_exceeded", 503: "server_overloaded"}.get(
            self.code, "invalid_request_error" if self.code < 500 else "server_error"
        )
        return {"error": {"message": self.message, "type": kind, "param": None, "code": (self.reason or kind).lower()}}


def invalid(message: str, reason: str | None = None) -> ApiError:
    return ApiError(400, message, reason)


def quota_exceeded(retry_after_s: float) -> ApiError:
    return ApiError(429, QUOTA_MESSAGE, "RATE_LIMIT_EXCEEDED", {"Retry-After": str(max(1, int(retry_after_s + 0.999)))})


def retry_after(seconds: float) -> dict[str, str]:
    """The ``Retry-After`` header: whole seconds, at least 1."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def shed(message: str, retry_after_s: float) -> ApiError:
    """429 for overload: the queue already holds more than the server can answer within its bound."""
    return ApiError(429, f"The server is overloaded: {message}", "SERVER_OVERLOADED", retry_after(retry_after_s))


def overloaded(message: str) -> ApiError:
    return ApiError(503, message, None, {"Retry-After": "1"})
