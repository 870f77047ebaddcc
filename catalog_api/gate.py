"""The `/v1` gate, a plain ASGI middleware: every `/v1` request is authenticated and counted here,
before routing, so unknown routes, wrong methods, errors and 304s all carry the `RateLimit` headers
and nothing past the gate runs without a valid key. Requests without a valid key are counted per
client address, so guessing keys is rate limited too.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.auth import KeyVerifier, bearer_token
from catalog_api.envelope import error_body
from catalog_api.errors import CHALLENGE
from catalog_api.ratelimit import Decision, RateLimiter

log = logging.getLogger(__name__)


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
        client = scope.get("client") or ("unknown", 0)
        decision = await self.limiter.hit(bucket or f"anon:{client[0]}")
        if not decision.allowed:
            await _send_error(
                send, decision, 429, "rate_limited", "Request budget spent; retry after Retry-After seconds."
            )
            return
        if bucket is None:
            message = "A valid API key is required: send 'Authorization: Bearer <key>'."
            challenge = [(b"www-authenticate", CHALLENGE.encode())]
            await _send_error(send, decision, 401, "unauthorized", message, challenge)
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
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await _send_error(send, decision, 500, "internal", "Internal error; please retry.")


async def _send_error(
    send: Send,
    decision: Decision,
    status: int,
    code: str,
    message: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = error_body(code, message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *decision.headers(),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
