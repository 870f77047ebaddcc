"""Counting every HTTP request by route template and status, and timing it: a plain ASGI middleware,
outermost, so the gate's 401s and 429s, the error guard's 500s and 304s are counted like the rest.

The route label is the template the router would pick (`/v1/cards/{card_id}`), found by asking each
route of the app whether it matches, the way Starlette's router does: new routes are covered without a
list to update, and a path no route matches is counted as `unmatched`, so random paths add no series.
A path that matches a route for another method (a `405`) gets that route's template.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.kit.metrics import HTTP_LATENCY, HTTP_REQUESTS, UNMATCHED_ROUTE
from catalog_api.kit.routes import app_routes

# Methods are few, but a client can send any token: others are counted as `other`.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_template(scope: Scope, routes: Sequence[Any]) -> str:
    """The template of the route that answers this request, or `unmatched`."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return _template(route)
        if match == Match.PARTIAL and partial is None:
            partial = _template(route)
    return partial or UNMATCHED_ROUTE


def _template(route: Any) -> str:
    # `path_format` drops convertors (`{path:path}` reads `{path}`), as a dashboard would write it.
    return str(getattr(route, "path_format", None) or getattr(route, "path", None) or UNMATCHED_ROUTE)


class HttpMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def routes(self, scope: Scope) -> list[Any]:
        return app_routes(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        # Before the router rewrites the scope (a Mount's root_path).
        route = route_template(scope, self.routes(scope))
        status = 500  # what the server answers when the app raises before starting a response

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            method = scope.get("method", "GET")
            method = method if method in METHODS else "other"
            HTTP_REQUESTS.labels(method, route, str(status)).inc()
            HTTP_LATENCY.labels(method, route).observe(time.perf_counter() - started)
