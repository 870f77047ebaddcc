"""Opaque, signed cursors and strict query integers.

A cursor names the last row served and the query it belongs to; one that was not issued by this
endpoint for this query (forged, foreign, stale, garbage) is ignored: first page. "Issued here" is
checked twice: the signature, and then the shape of the position it carries (each endpoint names the
types of its keyset), so a payload that is signed but malformed (a leaked secret, a change of order
between releases) is ignored the same way instead of reaching SQL or a comparison as a wrong type.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from typing import Any

import orjson

DEFAULT_LIMIT, MAX_LIMIT = 50, 200
# The types of a position's elements, in order: str, int or float (a float slot also takes a JSON int).
PositionShape = tuple[type, ...]
# Beyond these a value is out of range for every column we compare against (PostgreSQL bigint).
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_MAX_TEXT = 1000
# Text PostgreSQL cannot take as a parameter (NUL), or no encoder can send (lone surrogates).
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")
_QUERY_INT = re.compile(r"-?[0-9]+")
# Longer than this many digits saturates (int() refuses thousands of digits; no parameter needs more).
_QUERY_INT_DIGITS = 18


def sendable(text: str) -> bool:
    """Whether text can be a database parameter. PostgreSQL refuses NUL in text (an error, so a 500 if
    it came from a request), and such text can be no stored id, so a lookup by it finds nothing."""
    return not _UNSENDABLE.search(text)


def parse_query_int(raw: str) -> int | None:
    """A query-string integer: ASCII digits with an optional leading `-`; None for anything else.

    Stricter than int(), which also reads `1_0` as 10 and accepts `+`, surrounding spaces and other
    scripts' digits; a value longer than 18 digits saturates at ±10**18."""
    if not _QUERY_INT.fullmatch(raw):
        return None
    digits = raw.removeprefix("-").lstrip("0") or "0"
    value = 10**_QUERY_INT_DIGITS if len(digits) > _QUERY_INT_DIGITS else int(digits)
    return -value if raw.startswith("-") else value


def parse_limit(raw: str | None) -> int:
    """1..200, default 50; larger values clamp to 200, non-numeric and values below 1 fall back to 50."""
    value = DEFAULT_LIMIT if raw is None else parse_query_int(raw)
    if value is None or value < 1:
        return DEFAULT_LIMIT
    return min(value, MAX_LIMIT)


def _fits(value: Any, kind: type) -> bool:
    if kind is str:
        return type(value) is str and len(value) <= _MAX_TEXT and sendable(value)
    if type(value) is int:  # bool is an int subclass, and is excluded by the exact type
        return kind in (int, float) and _INT_MIN <= value <= _INT_MAX
    return kind is float and type(value) is float and math.isfinite(value)


def fits_shape(position: Any, shape: PositionShape) -> bool:
    """Whether a decoded position has exactly the element types `shape` names."""
    return (
        isinstance(position, list)
        and len(position) == len(shape)
        and all(_fits(value, kind) for value, kind in zip(position, shape, strict=True))
    )


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]

    def encode(self, scope: list[Any], position: list[Any]) -> str:
        payload = orjson.dumps([scope, position])
        token = payload + self._mac(payload)
        return base64.urlsafe_b64encode(token).rstrip(b"=").decode()

    def decode(self, cursor: str | None, scope: list[Any], shape: PositionShape) -> list[Any] | None:
        """The position stored in the cursor (float slots as floats), or None when the cursor is not
        ours for this scope or its position is not of this `shape`."""
        if not cursor or len(cursor) > 2048 or not cursor.isascii():
            return None
        try:
            token = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except ValueError:
            return None
        payload, mac = token[:-16], token[-16:]
        if len(token) <= 16 or not hmac.compare_digest(mac, self._mac(payload)):
            return None
        try:
            stored_scope, position = orjson.loads(payload)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            return None
        if stored_scope != scope or not fits_shape(position, shape):
            return None
        return [float(value) if kind is float else value for value, kind in zip(position, shape, strict=True)]
