"""What handlers share, built once in the app's lifespan and handed out as a typed dependency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine

from catalog_api.pagination import CursorCodec
from catalog_api.settings import Settings
from catalog_api.snapshot import SnapshotHolder


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    snapshots: SnapshotHolder
    cursors: CursorCodec


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


Context = Annotated[AppContext, Depends(get_context)]
