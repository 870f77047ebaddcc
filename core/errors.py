"""One error hierarchy for the whole API; `app.py` maps it to the spec's `{data, error}` envelope."""

from __future__ import annotations


class APIError(Exception):
    """An error with a stable machine `code` (the spec's) and the HTTP status it answers with."""

    status: int = 500
    code: str = "internal"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message or self.code
        self.headers = headers or {}


class BadRequest(APIError):
    status, code = 400, "bad_request"


class UnsupportedImage(APIError):
    status, code = 400, "unsupported_image"


class URLNotAllowed(APIError):
    status, code = 400, "url_not_allowed"


class URLFetchFailed(APIError):
    status, code = 400, "url_fetch_failed"


# Every 401 names the scheme that would succeed (RFC 9110 15.5.2, RFC 6750 3): the API's one scheme.
CHALLENGE = "Bearer"


class Unauthorized(APIError):
    """A 401 always carries its challenge, `WWW-Authenticate: Bearer` (RFC 9110 15.5.2 requires one)."""

    status, code = 401, "unauthorized"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, headers={"WWW-Authenticate": CHALLENGE, **(headers or {})})


class NotFound(APIError):
    status, code = 404, "not_found"


class MethodNotAllowed(APIError):
    # The spec has no code of its own for a wrong method: it is a request the API cannot accept.
    status, code = 405, "bad_request"


class Conflict(APIError):
    """A request that contradicts the resource's state (a photo added to a closed batch) or an
    `Idempotency-Key` already used for another request: a code the spec leaves to new endpoints."""

    status, code = 409, "conflict"


class PayloadTooLarge(APIError):
    status, code = 413, "payload_too_large"


class RateLimited(APIError):
    status, code = 429, "rate_limited"


class Internal(APIError):
    status, code = 500, "internal"


# Seconds a client is told to wait when the database cannot be reached: a restart or failover takes a few.
DATABASE_RETRY_AFTER_S = 2


class DatabaseUnavailable(Internal):
    """The database cannot be reached (restart, failover, network). The spec has no code of its own for
    it, so it stays `500 internal`, with `Retry-After` saying it is worth retrying soon."""

    def __init__(self, message: str = "The database is unavailable; please retry.") -> None:
        super().__init__(message, headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)})


class ScanUnavailable(APIError):
    status, code = 503, "scan_unavailable"
