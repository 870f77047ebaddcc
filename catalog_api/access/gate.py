"""The `/v1` gate, a plain ASGI middleware: every `/v1` request is authenticated and counted here,
before routing, so unknown routes, wrong methods, errors and 304s all carry the `RateLimit` headers
and nothing past the gate runs without a valid key. Requests without a valid key are counted per
client address, so guessing keys is rate limited too.

Guessing must also be cheap: a presented key costs a database lookup, so once an address has spent its
anonymous budget, keys from it are refused with `429` before any lookup until its window resets. Only
keys this process has seen valid skip that check (they are still looked up on every request, so a
revocation takes effect at once): a client with a good key is not locked out by a neighbour guessing
from the same address (a NAT, or a proxy whose `X-Forwarded-For` is not trusted).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.access.keys import KeyVerifier, bearer_token, hash_key
from catalog_api.access.ratelimit import Decision, RateLimiter
from catalog_api.kit.errors import RateLimited, Unauthorized
from catalog_api.kit.http_errors import as_api_error, send_error
from catalog_api.kit.metrics import RATE_LIMITED as RATE_LIMITED_COUNT

log = logging.getLogger(__name__)
RATE_LIMITED = "Request budget spent; retry after Retry-After seconds."


def is_v1(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


class V1Gate:
    def __init__(
        self, app: ASGIApp, keys: KeyVerifier, limiter: RateLimiter, max_remembered: int = 100_000
    ) -> None:
        self.app, self.keys, self.limiter = app, keys, limiter
        self.max_remembered = max_remembered
        # address -> monotonic time its anonymous window resets, for addresses over their budget
        self._spent: OrderedDict[str, float] = OrderedDict()
        # digests of keys this process has verified (values unused): they skip the spent-address check
        self._seen_valid: OrderedDict[str, None] = OrderedDict()

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
        address = str((scope.get("client") or ("unknown", 0))[0])
        anonymous = f"anon:{address}"
        bucket, counted = None, None
        if token:
            digest = hash_key(token)
            if digest not in self._seen_valid and self._is_spent(address):
                counted = await self.limiter.hit(anonymous)  # counted, and no lookup
                if not counted.allowed:
                    RATE_LIMITED_COUNT.labels("anonymous").inc()
                    await send_error(send, RateLimited(RATE_LIMITED), counted.headers())
                    return
                self._spent.pop(address, None)  # a new window (another process may have started it)
            bucket = await self.keys.verify(token)
            self._remember_valid(digest, bucket is not None)
        if bucket is None and counted is not None:
            decision = counted  # this request was counted against the address already
        else:
            decision = await self.limiter.hit(bucket or anonymous)
        if not decision.allowed:
            RATE_LIMITED_COUNT.labels("anonymous" if bucket is None else "key").inc()
            if bucket is None:
                self._mark_spent(address, decision.reset)
            await send_error(send, RateLimited(RATE_LIMITED), decision.headers())
            return
        if bucket is None:
            message = "A valid API key is required: send 'Authorization: Bearer <key>'."
            await send_error(send, Unauthorized(message), decision.headers())
            return
        scope.setdefault("state", {})["rate_bucket"] = bucket
        await self._call_with_headers(scope, receive, send, decision)

    def _is_spent(self, address: str) -> bool:
        resets_at = self._spent.get(address)
        if resets_at is None:
            return False
        if resets_at <= time.monotonic():
            del self._spent[address]
            return False
        return True

    def _mark_spent(self, address: str, reset_s: int) -> None:
        self._spent.pop(address, None)
        self._spent[address] = time.monotonic() + reset_s
        if len(self._spent) > self.max_remembered:
            self._spent.popitem(last=False)

    def _remember_valid(self, digest: str, valid: bool) -> None:
        if not valid:
            self._seen_valid.pop(digest, None)  # revoked or expired: no longer skips the check
            return
        self._seen_valid.pop(digest, None)
        self._seen_valid[digest] = None
        if len(self._seen_valid) > self.max_remembered:
            self._seen_valid.popitem(last=False)

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
