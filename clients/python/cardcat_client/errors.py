"""The one exception the client raises for an API failure, built from the `{data, error}` envelope."""

from __future__ import annotations

from collections.abc import Mapping


class CardcatError(Exception):
    """A request the API refused or could not answer.

    `status` is the HTTP status (0 when no answer came: the connection failed); `code` is the spec's
    stable machine token (`not_found`, `rate_limited`, `unauthorized`, `bad_request`, …; branch on it);
    `message` is for people. An answer that is not the envelope (a proxy's error page) gets the code
    `http_<status>`. `retry_after` is the server's `Retry-After` in seconds, when it sent one."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.headers = dict(headers or {})


class CardcatConnectionError(CardcatError):
    """No HTTP answer at all (refused, reset, timed out); `status` is 0, `code` is `connection_error`."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "connection_error", message)


class WebhookVerificationError(ValueError):
    """A webhook delivery whose signature, timestamp or headers do not check out: do not trust it."""
