"""What handlers share, built once in the app's lifespan and handed out as a typed dependency."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

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
    key = (await context.snapshots.data_version(), request.url.path, request.url.query)
    hit = context.cache.get(key)
    if hit is None:
        body = envelope_body(await produce())
        hit = (body, etag_of(body))
        context.cache.put(key, *hit)
    return conditional_response(request, *hit)
