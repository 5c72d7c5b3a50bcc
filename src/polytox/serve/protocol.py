"""uvicorn's h11 protocol with two fixes at the HTTP layer, below the app.

- A request head (request line and headers) over ``MAX_HEAD_BYTES`` gets 431 (Request Header Fields Too
  Large), in Google's error shape; other malformed HTTP keeps uvicorn's 400, in the same shape.
- After such an answer the connection lingers: the rest of what the client sends is read and dropped for
  up to ``LINGER_S`` seconds before the socket closes. Closing a socket that still has unread data makes
  the kernel send a reset, and the client then sees "connection reset" instead of the answer.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import ApiError

MAX_HEAD_BYTES = 16 * 1024  # h11's own default: far above any real client's headers
LINGER_S = 2.0  # how long a refused connection keeps reading (and dropping) what the client still sends


REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}


class LimitedH11Protocol(H11Protocol):
    """``H11Protocol`` answering 431 to an oversized head and closing without a reset (module doc)."""

    _lingering = False

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # the answer is sent: drop the rest of the refused request
            return
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        pending = len(self.conn.trailing_data[0])
        if pending > MAX_HEAD_BYTES:
            err = ApiError(431, f"Request header fields too large: the limit is {MAX_HEAD_BYTES} bytes.")
        else:
            err = ApiError(400, f"{msg} (malformed HTTP)")
        body = json.dumps(err.google_body()).encode()
        headers = [
            (b"content-type", b"application/json; charset=UTF-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        head = h11.Response(status_code=err.code, headers=headers, reason=REASONS[err.code])
        for event in (head, h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self._lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)
