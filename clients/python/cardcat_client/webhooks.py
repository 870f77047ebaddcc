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
    far `webhook-timestamp` may be from now, either way (Standard Webhooks' five minutes by default).

    Whatever the headers hold (non-ASCII, lone surrogates, junk), the only exception raised is
    `WebhookVerificationError`, so a receiver that catches it answers 401 to any forgery, never 500."""
    raw = _utf8(body) if isinstance(body, str) else bytes(body)
    lowered = {key.lower(): value for key, value in headers.items()}
    try:
        msg_id = lowered["webhook-id"]
        stamp = lowered["webhook-timestamp"]
        signatures = lowered["webhook-signature"]
    except KeyError as missing:
        raise WebhookVerificationError(f"missing header {missing.args[0]}") from None
    # ASCII digits only: int() also takes other scripts' digits, `_` and spaces, none of which we send.
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 18:
        raise WebhookVerificationError("webhook-timestamp is not an integer")
    timestamp = int(stamp)
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp is too old or in the future")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not a whsec_ base64 secret") from None
    signed = _utf8(f"{msg_id}.{timestamp}.") + raw
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    offered = [part.partition(",") for part in signatures.split()]
    # Compared as bytes: compare_digest raises TypeError on a str with any non-ASCII character, which
    # would turn a forged header into a 500 in the receiver instead of this refusal.
    if not any(v == "v1" and hmac.compare_digest(_utf8(sig), expected) for v, _, sig in offered):
        raise WebhookVerificationError("no signature matches")
    try:
        event = WebhookEvent.model_validate(json.loads(raw))
    except ValueError as exc:
        raise WebhookVerificationError(f"the signed body is not an event: {exc}") from None
    if event.id != msg_id:
        raise WebhookVerificationError("webhook-id does not name the event in the body")
    return event


def _utf8(text: str) -> bytes:
    """Header and body text as bytes, whatever it holds: a lone surrogate (from a framework that decoded
    with `surrogateescape`) is passed through rather than raising `UnicodeEncodeError`."""
    return text.encode("utf-8", "surrogatepass")
