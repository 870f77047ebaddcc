"""The `/v1` gate, a plain ASGI middleware: every `/v1` request is authenticated and counted here,
before routing, so unknown routes, wrong methods, errors and 304s all carry the `RateLimit` headers
and nothing past the gate runs without a valid key.

Every well-formed key is looked up (`KeyVerifier`, which skips digests it refused seconds ago), and a
valid key is counted only in its own bucket: nothing another client sends can spend it. Requests
without a valid key (none, malformed, unknown, revoked, expired) are counted per client address, so
guessing and junk floods are throttled there (`429`) without touching any valid key's budget. An IPv6
client owns its whole /64 (one subscriber's allocation), so it cannot take a fresh bucket per address.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.access.keys import KeyVerifier, bearer_token
from catalog_api.access.ratelimit import Decision, RateLimiter, client_of
from catalog_api.kit.http_errors import as_api_error, send_error
from catalog_api.kit.metrics import RATE_LIMITED as RATE_LIMITED_COUNT
from core.errors import RateLimited, Unauthorized

log = logging.getLogger(__name__)
RATE_LIMITED = "Request budget spent; retry after Retry-After seconds."


def is_v1(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


class V1Gate:
    def __init__(self, app: ASGIApp, keys: KeyVerifier, limiter: RateLimiter) -> None:
        self.app, self.keys, self.limiter = app, keys, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_v1(scope["path"]):
            await self.app(scope, receive, send)
            return
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        token = bearer_token(authorization)
        bucket = await self.keys.verify(token) if token else None
        address = str((scope.get("client") or ("unknown", 0))[0])
        decision = await self.limiter.hit(bucket or "anon:" + client_of(address))
        if not decision.allowed:
            RATE_LIMITED_COUNT.labels("anonymous" if bucket is None else "key").inc()
            await send_error(send, RateLimited(RATE_LIMITED), decision.headers())
            return
        if bucket is None:
            message = "A valid API key is required: send 'Authorization: Bearer <key>'."
            await send_error(send, Unauthorized(message), decision.headers())
            return
        scope.setdefault("state", {})["rate_bucket"] = bucket
        await self._call_with_headers(scope, receive, send, decision)

    async def _call_with_headers(
        self, scope: Scope, receive: Receive, send: Send, decision: Decision
    ) -> None:
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *decision.headers()]
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            if started:
                log.exception(
                    "error after the response started: %s %s", scope.get("method"), scope.get("path")
                )
                raise
            await send_error(send, as_api_error(exc), decision.headers())
