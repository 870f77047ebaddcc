"""What handlers share, built once in the app's lifespan and handed out as a typed dependency.

Every room's routes import this module, so it names no room's types: what only one room needs (the
catalog's read model, the scanner's client) that room hands out itself (`catalog.readmodel.Snapshots`,
`scan.scanning.ScanningState`); the response cache reads the data's version through `data_version`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from catalog_api.access.gate import is_v1
from catalog_api.kit.cache import ResponseCache
from catalog_api.kit.envelope import conditional_response, data_response, envelope_body, etag_of
from catalog_api.kit.pagination import CursorCodec
from catalog_api.kit.routes import app_routes
from catalog_api.kit.settings import Settings

# Scope key of the route `RouteQueries.names` matched for a request (before the router does).
MATCHED_ROUTE = "cardcat.route"


class RouteQueries:
    """Which query parameters the route answering a request declares (`names`).

    The route is the one the router picks, found once a request and left in its scope (MATCHED_ROUTE),
    so the cache before routing, the handler and the access log agree on it without matching again.
    Matching costs a regex and some Python per route tried (tens of microseconds for a late route), so
    the route found for a GET path is remembered, for up to MEMO_PATHS paths at a time."""

    MEMO_PATHS = 1024  # at most ~0.4 MB of paths
    MEMO_PATH_CHARS = 256

    def __init__(self) -> None:
        self._declared: dict[int, frozenset[str]] = {}
        self._by_path: dict[str, Any] = {}

    def names(self, scope: Scope) -> frozenset[str] | None:
        """The names (aliases) of the query parameters the route answering `scope` declares, through
        its dependencies too; None when no route fully matches."""
        route = scope.get(MATCHED_ROUTE) or scope.get("route")
        if route is None:
            route = self._match(scope)
            if route is None:
                return None
            scope[MATCHED_ROUTE] = route
        declared = self._declared.get(id(route))
        if declared is None:
            declared = self._declared[id(route)] = _declared_query(route)
        return declared

    def _match(self, scope: Scope) -> Any:
        path = scope["path"]
        memo = scope["method"] == "GET" and len(path) <= self.MEMO_PATH_CHARS
        if memo and path in self._by_path:
            return self._by_path[path]
        route = next((r for r in app_routes(scope) if r.matches(scope)[0] == Match.FULL), None)
        if memo:
            if len(self._by_path) >= self.MEMO_PATHS:
                self._by_path.clear()
            self._by_path[path] = route
        return route


def _declared_query(route: Any) -> frozenset[str]:
    dependant = getattr(getattr(route, "original_route", route), "dependant", None)
    names: set[str] = set()
    pending = [dependant] if dependant is not None else []
    while pending:
        current = pending.pop()
        names.update(param.alias for param in current.query_params)
        pending.extend(current.dependencies)
    return frozenset(names)


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    # The version of the data reads answer from (the read model's feed versions, re-read at most once a
    # second): part of every response-cache key, so a sync shows up as new keys.
    data_version: Callable[[], Awaitable[Hashable]]
    cursors: CursorCodec
    cache: ResponseCache | None = None
    # The query parameters each route declares (the response cache's key keeps only those).
    queries: RouteQueries = field(default_factory=RouteQueries, repr=False)


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


Context = Annotated[AppContext, Depends(get_context)]


async def cached_read(
    request: Request, context: AppContext, produce: Callable[[], Awaitable[Any]]
) -> Response:
    """A GET read through the response cache: same path, query and data version, same body and ETag.
    Errors raised by `produce` (404, 400) are not cached."""
    if context.cache is None:
        return data_response(request, await produce())
    key = await read_key(request, context)
    hit = None if key is None else context.cache.get(key)
    if hit is None:
        body = envelope_body(await produce())
        hit = (body, etag_of(body))
        if key is not None:
            context.cache.put(key, *hit)
    return conditional_response(request, *hit)


async def read_key(request: Request, context: AppContext) -> str | None:
    """A read's response-cache key: the data it was read from, its path, and the query parameters its
    route declares (sorted by name, each name's values in the order sent); None for a path no GET route
    answers.

    The API ignores parameters a route does not declare, so they cannot change the answer and are left
    out: junk in the query (`?junk=<60 KB>`) neither makes a new entry nor lengthens one. What is kept
    can be long (`ids` names up to 200 cards, `cursor` takes any text), so the cache refuses keys over
    its cap and counts the rest in its budget (`kit.cache`)."""
    scope = request.scope
    names = context.queries.names(scope)
    if names is None:
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    pairs = [] if not query else parse_qsl(query, keep_blank_values=True)  # as Starlette parses it
    # Sorted by name only (stable), so a name given twice keeps its values' order, which can matter.
    known = tuple(sorted((pair for pair in pairs if pair[0] in names), key=itemgetter(0)))
    return repr((await context.data_version(), scope["path"], known))


class CachedReads:
    """Answers a `GET /v1` read the response cache holds before routing, so a hit (a 304 above all)
    skips FastAPI's validation of the route's parameters: `GET /v1/cards` declares about twenty, and
    checking them was most of what a revalidation cost beyond the key check (profiled). Sound because
    `cached_read` stores only answers it produced, keyed by the path and every value of the route's
    declared parameters: that request passed validation, and so would one differing only in parameters
    the route ignores. Runs inside the gate, so a hit is authorised and counted."""

    def __init__(self, app: ASGIApp, context: AppContext) -> None:
        self.app, self.context = app, context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cache = self.context.cache
        read = scope["type"] == "http" and scope["method"] == "GET" and is_v1(scope["path"])
        if cache is not None and read:
            request = Request(scope)
            try:
                key = await read_key(request, self.context)
            except Exception:  # the database away before any snapshot: the route answers as usual
                key = None
            hit = None if key is None else cache.get(key)
            if hit is not None:
                await conditional_response(request, *hit)(scope, receive, send)
                return
        await self.app(scope, receive, send)
