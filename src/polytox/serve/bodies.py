"""Reading and decoding a request body: its size limit, its ``Content-Type`` and its JSON.

- The body is read up to ``max_body_bytes``, whether it declares a ``Content-Length`` or arrives chunked;
  past the limit the answer is 413. The rest of an oversized body is read and dropped (up to
  ``DRAIN_FACTOR`` times the limit) before answering, because a server that answers and closes while the
  client is still sending makes the client's kernel see a connection reset instead of the 413.
- ``Content-Type`` must be present and name JSON; a ``charset`` other than UTF-8 is refused (JSON is
  UTF-8; a UTF-8 body labelled UTF-16 is a client bug worth one clear 400).
- Duplicate keys in a JSON object are refused (Perspective's protobuf parser refuses them), not silently
  resolved to the last one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from .errors import ApiError, invalid

DRAIN_FACTOR = 64  # an oversized body is read and dropped up to this many times the limit, then cut off


class BodyTooLarge(ApiError):
    """413: the body is over the limit; ``drained`` says whether it was read to its end."""

    def __init__(self, limit: int, drained: bool) -> None:
        super().__init__(413, f"Request payload size exceeds the limit: {limit} bytes.")
        self.drained = drained


async def read_limited(stream: AsyncIterator[bytes], declared: str | None, limit: int) -> bytes:
    """The body from ``stream``, or ``BodyTooLarge`` once it passes ``limit`` bytes (at once when the
    declared ``Content-Length`` says so, without reading it)."""
    if declared and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, drained=False)
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit, await _drain(stream, size, limit * DRAIN_FACTOR))
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(stream: AsyncIterator[bytes], size: int, cap: int) -> bool:
    """Read and drop the rest of ``stream``; False when it goes past ``cap`` bytes (the client keeps sending)."""
    async for chunk in stream:
        size += len(chunk)
        if size > cap:
            return False
    return True


def check_content_type(content_type: str | None) -> None:
    """400 unless ``content_type`` names JSON (``application/json``, ``...+json``) with no charset but UTF-8."""
    if not content_type or not content_type.strip():
        raise invalid("Invalid JSON payload received. Content-Type is missing; send application/json.")
    media, *params = (part.strip() for part in content_type.split(";"))
    if not media.lower().endswith("json"):
        raise invalid(f"Invalid JSON payload received. Content-Type must be application/json, got {media!r}.")
    for param in params:
        name, _, value = param.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            raise invalid(f"Invalid JSON payload received. charset={charset} is not supported; JSON is sent as UTF-8.")


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses an object naming the same key twice (``ValueError``)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f'Duplicate key "{key}"')
        out[key] = value
    return out
