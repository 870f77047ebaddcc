"""Wire shapes of `GET /health`, for OpenAPI and the tests."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catalog_api.kit.schemas import Strict


class FeedHealth(Strict):
    status: str = Field(description="ok, stale or never_synced")
    synced_at: str | None = Field(description="ISO 8601 UTC time of the last successful sync")
    observed_on: str | None


class Health(Strict):
    status: Literal["ok", "degraded"]
    feeds: dict[str, FeedHealth]
    last_updated: str | None
