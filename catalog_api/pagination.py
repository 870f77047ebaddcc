"""Opaque, signed cursors. A cursor names the last row served and the query it belongs to; one that was
not issued by this endpoint for this query (forged, foreign, stale, garbage) is ignored: first page."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import orjson

DEFAULT_LIMIT, MAX_LIMIT = 50, 200


def parse_limit(raw: str | None) -> int:
    """1..200, default 50; larger values clamp to 200, non-numeric and values below 1 fall back to 50."""
    try:
        value = int(raw) if raw is not None else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT
    if value < 1:
        return DEFAULT_LIMIT
    return min(value, MAX_LIMIT)


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]

    def encode(self, scope: list[Any], position: list[Any]) -> str:
        payload = orjson.dumps([scope, position])
        token = payload + self._mac(payload)
        return base64.urlsafe_b64encode(token).rstrip(b"=").decode()

    def decode(self, cursor: str | None, scope: list[Any]) -> list[Any] | None:
        """The position stored in the cursor, or None when the cursor is not ours for this scope."""
        if not cursor or len(cursor) > 2048:
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
        if stored_scope != scope or not isinstance(position, list):
            return None
        return position
