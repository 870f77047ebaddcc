"""The envelope for requests uvicorn cannot parse.

uvicorn answers a request it cannot parse (a `Content-Length` that is not a number, a malformed request
line or header, a bad chunk size) itself, with a plain-text `400`, before any ASGI app sees it: no
middleware or exception handler of ours can touch that answer. Both of uvicorn's HTTP protocols (h11 and
httptools) write it through one method, `send_400_response`; the protocol classes here override just
that method, and `cardcat serve` hands uvicorn the httptools one (`cardcat.cli`), so the answer is
the `{data, error}` envelope like every other error.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from catalog_api.kit.envelope import error_body

MESSAGE = "The request is not valid HTTP (a malformed request line, header or Content-Length)."


def send_envelope_400(protocol: Any, _reason: str) -> None:
    """Write a `400 bad_request` envelope and close: the connection's framing is unknown past a parse
    error, so nothing more can be read from it (as uvicorn's own answer does)."""
    body = error_body("bad_request", MESSAGE)
    head = [b"HTTP/1.1 400 Bad Request\r\n"]
    for name, value in protocol.server_state.default_headers:
        head.append(name + b": " + value + b"\r\n")
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
    head.append(b"connection: close\r\n\r\n")
    protocol.transport.write(b"".join(head) + body)
    protocol.transport.close()


class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering unparseable requests in the envelope."""

    def send_400_response(self, msg: str) -> None:
        send_envelope_400(self, msg)


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, answering unparseable requests in the envelope."""

    def send_400_response(self, msg: str) -> None:
        send_envelope_400(self, msg)
