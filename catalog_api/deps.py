"""What handlers share, built once in the app's lifespan and handed out as a typed dependency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import httpx
from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from catalog_api.pagination import CursorCodec
from catalog_api.settings import Settings
from catalog_api.snapshot import SnapshotHolder
from serve_app.intake import FetchPolicy


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    snapshots: SnapshotHolder
    cursors: CursorCodec
    fetch_policy: FetchPolicy = field(default_factory=FetchPolicy)
    # Talks to the Ray Serve scanner; None when scanning is not configured.
    scanner: httpx.AsyncClient | None = None


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


Context = Annotated[AppContext, Depends(get_context)]
