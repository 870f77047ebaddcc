"""The access log: one JSON line per HTTP request on the `cardcat.access` logger, written by a plain ASGI
middleware, outermost, so the gate's 401s and 429s, the error guard's 500s and cached 304s are logged
like the rest.

A line holds the time (UTC) and what an operator needs, and nothing a reader of the logs could replay:
the method, the route template the router picks (`/v1/cards/{card_id}`, never the raw path, which may
be anything a client sends), the status, the key's public prefix (the 10 characters `cardcat keys list`
shows, only for a well-formed key), the latency in milliseconds and the body bytes sent. Never the
`Authorization` header, the full key, or the query string (signed file URLs carry their signature).

`cardcat serve` sends these lines to stderr and leaves uvicorn's own access log off, so a request is
logged once; `CARDCAT_ACCESS_LOG=false` turns ours off too.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.access.keys import bearer_token
from catalog_api.deps import MATCHED_ROUTE
from catalog_api.kit.metrics import UNMATCHED_ROUTE
from catalog_api.kit.routes import app_routes
from catalog_api.ops.http_metrics import METHODS, route_template

LOGGER = "cardcat.access"
log = logging.getLogger(LOGGER)
# The public part of a key (`cc_` and 7 characters): what `cardcat keys list` shows and `keys revoke`
# accepts; the other 39 characters are the secret.
KEY_PREFIX_CHARS = 10


def key_prefix(scope: Scope) -> str | None:
    """The public prefix of the bearer key this request sends, or None when it sends no well-formed
    key (a malformed token's first characters could be anything, a password pasted by mistake)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            token = bearer_token(value.decode("latin-1"))
            return None if token is None else token[:KEY_PREFIX_CHARS]
    return None


def access_line(method: str, route: str, status: int, key: str | None, latency_s: float, sent: int) -> str:
    """One request as a JSON object on one line (JSON escapes every control character, so nothing a
    client sends can start a line of its own)."""
    record = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "method": method,
        "route": route,
        "status": status,
        "key": key,
        "ms": round(latency_s * 1000, 2),
        "bytes": sent,
    }
    return json.dumps(record, separators=(",", ":"))


class AccessLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def routes(self, scope: Scope) -> list[Any]:
        return app_routes(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status, sent = 500, 0  # what the server answers when the app raises before starting a response

        async def send_and_note(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            latency = time.perf_counter() - started
            method = scope.get("method", "GET")
            method = method if method in METHODS else "other"
            log.info(access_line(method, self.template(scope), status, key_prefix(scope), latency, sent))

    def template(self, scope: Scope) -> str:
        """The template of the route that answered: the one the router (or the response cache, before
        it) picked and left in the scope; else, when the request never got that far (the gate's 401s
        and 429s, a path no route matches), found the way the router would."""
        route = scope.get(MATCHED_ROUTE) or scope.get("route")
        if route is not None:
            return str(getattr(route, "path_format", None) or getattr(route, "path", None) or UNMATCHED_ROUTE)
        return route_template(scope, self.routes(scope))


def uvicorn_log_config(enabled: bool) -> dict[str, Any]:
    """uvicorn's own logging configuration plus the access logger, to stderr, one bare JSON line per
    record (not passed on to the root logger, so a process that also configures the root does not
    print it twice). Applied by uvicorn in each worker process."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["cardcat_access"] = {"format": "%(message)s"}
    config["handlers"]["cardcat_access"] = {
        "class": "logging.StreamHandler",
        "formatter": "cardcat_access",
        "stream": "ext://sys.stderr",
    }
    config["loggers"][LOGGER] = {
        "handlers": ["cardcat_access"],
        "level": "INFO" if enabled else "WARNING",
        "propagate": False,
    }
    return config
