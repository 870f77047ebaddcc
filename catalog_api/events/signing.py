"""Standard Webhooks signing: the secret each endpoint gets and the headers every delivery carries.

Receivers verify `webhook-signature` with any Standard Webhooks library; the deliverer signs each
attempt afresh (the timestamp is part of what is signed)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

SECRET_PREFIX = "whsec_"
USER_AGENT = "cardcat-webhooks/1"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    """`webhook-signature`: `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`, keyed by the
    base64-decoded secret."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(secret: str, event_id: str, body: str, now: float | None = None) -> dict[str, str]:
    timestamp = int(time.time() if now is None else now)
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, event_id, timestamp, body),
    }
