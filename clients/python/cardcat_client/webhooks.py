"""Checking a webhook delivery before trusting it (Standard Webhooks, as cardcat signs them).

cardcat signs `{webhook-id}.{webhook-timestamp}.{body}` with HMAC-SHA256 keyed by the base64 part of the
endpoint's `whsec_…` secret, and sends `webhook-signature: v1,<base64>` (a space-separated list when
several secrets are in play). A receiver must check the signature over the raw bytes it received (not a
re-serialised parse) and refuse old timestamps, or a captured delivery could be replayed later."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping

from cardcat_client.errors import WebhookVerificationError
from cardcat_client.models import WebhookEvent

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> WebhookEvent:
    """The delivery's event when its signature and timestamp check out; raises
    `WebhookVerificationError` otherwise. `headers` may use any letter case; `tolerance_s` bounds how
    far `webhook-timestamp` may be from now, either way (Standard Webhooks' five minutes by default)."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    lowered = {key.lower(): value for key, value in headers.items()}
    try:
        msg_id = lowered["webhook-id"]
        stamp = lowered["webhook-timestamp"]
        signatures = lowered["webhook-signature"]
    except KeyError as missing:
        raise WebhookVerificationError(f"missing header {missing.args[0]}") from None
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp is too old or in the future")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not a whsec_ base64 secret") from None
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.partition(",") for part in signatures.split()]
    if not any(v == "v1" and hmac.compare_digest(sig, expected) for v, _, sig in offered):
        raise WebhookVerificationError("no signature matches")
    try:
        event = WebhookEvent.model_validate(json.loads(raw))
    except ValueError as exc:
        raise WebhookVerificationError(f"the signed body is not an event: {exc}") from None
    if event.id != msg_id:
        raise WebhookVerificationError("webhook-id does not name the event in the body")
    return event
