"""The spec's `{data, error}` envelope, strong ETags and 304s, serialised with orjson."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

JSON = "application/json"


def error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"data": None, "error": {"code": code, "message": message}})


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def _matches(if_none_match: str, etag: str) -> bool:
    if if_none_match.strip() == "*":
        return True
    # If-None-Match uses the weak comparison (RFC 9110 13.1.2): a W/ prefix still matches.
    candidates = (tag.strip().removeprefix("W/") for tag in if_none_match.split(","))
    return etag in candidates


def envelope_body(data: Any) -> bytes:
    return orjson.dumps({"data": data, "error": None})


def conditional_response(request: Request, body: bytes, etag: str) -> Response:
    """200 with the body and its strong ETag, or 304 when the client already has it."""
    if_none_match = request.headers.get("if-none-match")
    if if_none_match and _matches(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag})
    return Response(body, 200, headers={"ETag": etag}, media_type=JSON)


def data_response(request: Request, data: Any) -> Response:
    body = envelope_body(data)
    return conditional_response(request, body, etag_of(body))


def page(items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "next_cursor": next_cursor}
