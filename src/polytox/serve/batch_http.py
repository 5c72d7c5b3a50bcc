"""Google's HTTP batch format (``multipart/mixed`` of ``application/http`` parts), for ``/batch``.

``googleapiclient``'s ``service.new_batch_http_request()`` (the path RTP's and HELM's Perspective code
takes) sends up to 100 requests in one POST; each part is a whole HTTP request. The answer is a
``multipart/mixed`` body with one ``HTTP/1.1 <status>`` part per request, its ``Content-ID`` being the
request's prefixed with ``response-``. Each sub-request is handled (and metered) as if sent alone.
"""

from __future__ import annotations

import email.parser
import email.policy
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus

from .errors import invalid

MAX_PARTS = 100  # Perspective's (and Google's) limit of calls per batch request


@dataclass
class SubRequest:
    method: str
    target: str  # path and query, as on the request line
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_id: str | None = None


def parse_batch(content_type: str, body: bytes) -> list[SubRequest]:
    """The sub-requests of a batch body; 400 (Google-shaped) when it is not a valid batch."""
    if not content_type.lower().startswith("multipart/mixed") or "boundary=" not in content_type:
        raise invalid("A batch request must be multipart/mixed with a boundary.")
    raw = b"Content-Type: " + content_type.encode("latin-1") + b"\r\nMIME-Version: 1.0\r\n\r\n" + body
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
    if not message.is_multipart():
        raise invalid("A batch request must be multipart/mixed with a boundary.")
    parts = list(message.iter_parts())  # type: ignore[attr-defined]
    if not parts:
        raise invalid("The batch request has no parts.")
    if len(parts) > MAX_PARTS:
        raise invalid(f"A batch request may hold at most {MAX_PARTS} calls, got {len(parts)}.")
    out = []
    for i, part in enumerate(parts):
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            raise invalid(f"Batch part {i} holds no HTTP request.")
        out.append(_parse_http(payload, part.get("Content-ID"), i))
    return out


def _parse_http(payload: bytes, content_id: str | None, index: int) -> SubRequest:
    for sep in (b"\r\n\r\n", b"\n\n"):
        if sep in payload:
            head, body = payload.split(sep, 1)
            break
    else:
        raise invalid(f"Batch part {index} is not an HTTP request.")
    lines = head.decode("latin-1").splitlines()
    if not lines or len(lines[0].split()) < 2:
        raise invalid(f"Batch part {index} is not an HTTP request.")
    method, target = lines[0].split()[:2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "")
    body = body[: int(length)] if length.isdigit() else body.rstrip(b"\r\n")
    return SubRequest(method.upper(), target, headers, body, content_id)


def build_batch_response(answers: list[tuple[SubRequest, int, bytes]]) -> tuple[bytes, str]:
    """(body, content type) of the multipart answer; ``answers`` are (request, status, JSON body)."""
    boundary = f"batch_{uuid.uuid4().hex}"
    chunks = []
    for req, status, payload in answers:
        cid = req.content_id or ""
        cid = f"<response-{cid.strip('<>')}>" if cid else ""
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Unknown"
        head = (
            f"--{boundary}\r\nContent-Type: application/http\r\n" + (f"Content-ID: {cid}\r\n" if cid else "") + "\r\n"
            f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        )
        chunks.append(head.encode("latin-1") + payload + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode("latin-1"))
    return b"".join(chunks), f"multipart/mixed; boundary={boundary}"
