"""What handlers share, built once in the app's lifespan and handed out as a typed dependency."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from catalog_api.access.gate import is_v1
from catalog_api.catalog.readmodel import SnapshotHolder
from catalog_api.kit.cache import ResponseCache
from catalog_api.kit.envelope import conditional_response, data_response, envelope_body, etag_of
from catalog_api.kit.pagination import CursorCodec
from catalog_api.kit.settings import Settings
from catalog_api.scan.client import ScanClient
from catalog_api.scan.url_fetch import FetchPolicy


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    snapshots: SnapshotHolder
    cursors: CursorCodec
    cache: ResponseCache | None = None
    fetch_policy: FetchPolicy = field(default_factory=FetchPolicy)
    # Talks to the Ray Serve scanner; None when scanning is not configured.
    scanner: ScanClient | None = None


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
    hit = context.cache.get(key)
    if hit is None:
        body = envelope_body(await produce())
        hit = (body, etag_of(body))
        context.cache.put(key, *hit)
    return conditional_response(request, *hit)


async def read_key(request: Request, context: AppContext) -> tuple[Any, ...]:
    """A read's response-cache key: the data it was read from, its path and its query, exactly."""
    return (await context.snapshots.data_version(), request.url.path, request.url.query)


class CachedReads:
    """Answers a `GET /v1` read the response cache holds before routing, so a hit (a 304 above all)
    skips FastAPI's validation of the route's parameters: `GET /v1/cards` declares about twenty, and
    checking them was most of what a revalidation cost beyond the key check (profiled). Sound because
    `cached_read` stores only answers it produced, keyed by the exact path and query: that request
    passed validation and would again. Runs inside the gate, so a hit is authorised and counted."""

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
