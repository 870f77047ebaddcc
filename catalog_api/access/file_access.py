"""Who may use a signed file URL (`/files/bulk/…`, `/files/snapshots/…`) and how often.

Both kinds of file are served outside `/v1` (a download needs no `Authorization` header: the URL is its
own credential), so the `/v1` gate neither checks a key nor counts them. This module does both, for the
two kinds of URL the service hands out:

- **Bulk URLs are bound to the key that asked.** `GET /v1/bulk` signs each URL with the id of the API
  key on that request (`key=<id>`, covered by the HMAC, so it cannot be swapped for another key's id),
  valid `CARDCAT_FILE_URL_TTL_S` (an hour by default). Serving one looks that key up: revoked, expired or
  gone answers `403` (the spec fixes no 403 code; its code for a revoked or expired key is
  `unauthorized`, so that is the code, and there is no `WWW-Authenticate`: no header would help). A
  download is counted against that key's own `/v1` budget (the gate's bucket), so a leaked URL cannot
  be fetched without bound, nor used to get past the key's rate limit.
- **Snapshot URLs in events are bound to no key.** A `*_prices.snapshot` event is written once, when
  the price sync publishes the file, with no request and no key behind it; the same signed body goes to
  every webhook endpoint, and a receiver need not hold an API key at all. Deliveries are retried for
  about a day (the `webhooks_*` schedule), so these URLs live `CARDCAT_SNAPSHOT_URL_TTL_S`: two days by
  default (was 30), a day of retries plus a day to download. Binding them to the endpoint would mean
  re-signing the body per endpoint at delivery time (a change to the deliverer), left for later. They
  are counted per client address, in a bucket of their own (`files:<address>`), so a download flood
  cannot touch any key's budget. Requests with a bad signature are refused (`401`) before anything is
  counted or looked up: they cost one HMAC, and counting them in a shared bucket would let a stranger
  lock the genuine URLs out.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import FileResponse

from catalog_api.access import ratelimit
from catalog_api.access.keys import bearer_token, hash_key, is_expired, key_bucket
from catalog_api.access.ratelimit import Decision, RateLimiter
from catalog_api.access.tables import ApiKey
from catalog_api.kit.schemas import ErrorEnvelope
from catalog_api.kit.settings import Settings
from core.errors import APIError, NotFound, RateLimited

KEY_PARAM = "key"
# Bound URLs are issued on a grid of a quarter of their lifetime (at most an hour), so the same key
# gets the same listing, and its ETag, for that long; each URL lives between its TTL and 1.25 times it.
MAX_GRID_S = 3600
RATE_LIMITED = "Download budget spent; retry after Retry-After seconds."

RESPONSES: dict[int | str, dict[str, object]] = {
    429: {"model": ErrorEnvelope, "description": "rate_limited: the downloads' budget is spent"},
}
BOUND_RESPONSES: dict[int | str, dict[str, object]] = {
    **RESPONSES,
    403: {
        "model": ErrorEnvelope,
        "description": "unauthorized: the key the URL was issued to is revoked or expired",
    },
}


class KeyNotActive(APIError):
    """A well-signed URL whose key no longer opens anything (see the module docstring for the code)."""

    status, code = 403, "unauthorized"


def bound_expiry(settings: Settings, now: float | None = None) -> int:
    """When a bound URL issued now expires: TTL from now, rounded up to the grid."""
    ttl = settings.file_url_ttl_s
    grid = max(1, min(MAX_GRID_S, ttl // 4))
    return math.ceil(((time.time() if now is None else now) + ttl) / grid) * grid


def _message(signed_name: str, expires: int, key_id: int) -> bytes:
    # surrogatepass: a name is any text a URL path can carry; signing never raises on it.
    return f"{signed_name}:{expires}:{KEY_PARAM}={key_id}".encode("utf-8", "surrogatepass")


def sign_bound(settings: Settings, signed_name: str, expires: int, key_id: int) -> str:
    """The signature of a URL for `signed_name`, valid until `expires`, for key `key_id` only. Never
    equal to an unbound signature (`snapshot_files.sign`): that message ends in the digits of `expires`."""
    return hmac.new(
        settings.file_signing_key, _message(signed_name, expires, key_id), hashlib.sha256
    ).hexdigest()


def _ascii_int(text: str) -> int | None:
    # ASCII digits only: int() would also take `1_0`, spaces and other scripts' digits.
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def verify_bound(settings: Settings, signed_name: str, expires: str, key: str, signature: str) -> int | None:
    """The key id a URL is bound to when its signature is ours and it has not expired; None for any other
    text (the parameters come from anyone). Compared as bytes: compare_digest refuses non-ASCII str."""
    deadline, key_id = _ascii_int(expires), _ascii_int(key)
    if deadline is None or key_id is None:
        return None
    expected = sign_bound(settings, signed_name, deadline, key_id).encode()
    if not hmac.compare_digest(expected, signature.encode("utf-8", "surrogatepass")):
        return None
    return key_id if deadline >= time.time() else None


async def requesting_key(engine: AsyncEngine, request: Request) -> int:
    """The id of the API key on a `/v1` request the gate let through (so it names a valid key)."""
    token = bearer_token(request.headers.get("authorization"))
    if token is None:  # the gate admits no /v1 request without one
        raise KeyNotActive("A key is needed to issue file URLs.")
    async with engine.connect() as conn:
        key_id = await conn.scalar(select(ApiKey.id).where(ApiKey.key_hash == hash_key(token)))
    if key_id is None:
        raise KeyNotActive("The key was removed while the request ran.")
    return int(key_id)


async def active_key_bucket(engine: AsyncEngine, key_id: int) -> str:
    """The rate-limit bucket of key `key_id` when it is active; raises `KeyNotActive` otherwise.

    The bucket is the one the `/v1` gate counts that key's requests in (`access.keys.key_bucket`), so
    downloads share the key's budget;
    tests/catalog_api/test_file_urls.py spends one and sees the other refused."""
    stmt = select(ApiKey.key_hash, ApiKey.expires_at, ApiKey.revoked_at).where(ApiKey.id == key_id)
    async with engine.connect() as conn:
        row = (await conn.execute(stmt)).first()
    if row is None or row.revoked_at is not None:
        raise KeyNotActive("The key this URL was issued to has been revoked.")
    if is_expired(row.expires_at):
        raise KeyNotActive("The key this URL was issued to has expired.")
    return key_bucket(row.key_hash)


def address_bucket(request: Request) -> str:
    """The bucket of an unbound (event) URL's downloads: the client's address (IPv6 by its /64, as the
    gate counts it), apart from `/v1`'s."""
    return "files:" + ratelimit.client_of(request.client.host if request.client else "unknown")


def limiter_of(request: Request) -> RateLimiter:
    limiter: RateLimiter = request.app.state.rate_limiter
    return limiter


async def count(request: Request, bucket: str) -> dict[str, str]:
    """One download against `bucket`: the `RateLimit` headers to answer with, or `429 rate_limited`
    (with them and `Retry-After`) when the budget is spent."""
    decision: Decision = await limiter_of(request).hit(bucket)
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in decision.headers()}
    if not decision.allowed:
        raise RateLimited(RATE_LIMITED, headers=headers)
    return headers


def file_response(path: Path | None, file_name: str, headers: dict[str, str], missing: str) -> FileResponse:
    """A signed URL's gzip file, with the download budget's headers (`count`); `404` saying `missing`
    (with the same headers: the download was counted) when the file is gone."""
    if path is None:
        raise NotFound(missing, headers=headers)
    return FileResponse(path, media_type="application/gzip", filename=file_name, headers=headers)
