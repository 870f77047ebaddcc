"""`GET /health`: per-feed freshness from the sync state. No key needed; always 200 while answering.

Feed status says whether *we* are syncing: `never_synced` (no successful sync yet), `stale` (the last
successful sync is older than the feed's allowance: catalog `CARDCAT_CATALOG_MAX_AGE_S`, 8 days;
marketplace `CARDCAT_MARKETPLACE_MAX_AGE_S`, 36 hours), else `ok`.

The service is `degraded` when any feed is not `ok`, and also when the marketplace syncs fine but its
newest price (`observed_on`) is more than `CARDCAT_MARKETPLACE_MAX_LAG_DAYS` (3) days old: upstream has
published nothing new, so every feed reads `ok` while the prices we serve are old.

The report is computed at most once a second per worker (`CARDCAT_HEALTH_CACHE_S`) and served from
memory in between: `/health` needs no key, so without this every poll, from anyone, was a database
query. Requests that arrive while it is being computed wait for that one query. A failed query is never
cached (every waiter gets the failure), so a database outage shows within that second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import select
from starlette.responses import Response

from catalog_api.deps import AppContext, Context
from catalog_api.kit.envelope import data_response
from catalog_api.kit.models import FeedState
from catalog_api.kit.schemas import Envelope, ErrorEnvelope
from catalog_api.ops.schemas import Health

router = APIRouter(tags=["health"])
FEEDS = ("catalog", "marketplace")


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def feed_status(state: FeedState | None, max_age_s: int, now: datetime) -> str:
    if state is None or state.synced_at is None:
        return "never_synced"
    synced = state.synced_at if state.synced_at.tzinfo else state.synced_at.replace(tzinfo=UTC)
    return "stale" if (now - synced).total_seconds() > max_age_s else "ok"


class ReportMemo:
    """The last report one worker computed, served for `ttl_s` seconds after its query started; one
    computation in flight at a time, shared by every request that arrives meanwhile (so an expired
    report under a flood is still one query, and a hung database is waited on once, not in a queue)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._report: dict[str, Any] | None = None
        self._started = 0.0
        self._pending: asyncio.Future[dict[str, Any]] | None = None

    async def get(self, compute: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        if self.ttl_s <= 0:
            return await compute()
        if self._report is not None and time.monotonic() - self._started < self.ttl_s:
            return self._report
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._refresh(compute))
            # Every waiter may be gone (clients hung up): the failure is then read here, not logged as
            # "never retrieved".
            self._pending.add_done_callback(lambda done: done.cancelled() or done.exception())
        # Shielded: a client that hangs up cancels its own wait, not the query the others wait on.
        return await asyncio.shield(self._pending)

    async def _refresh(self, compute: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        started = time.monotonic()
        try:
            report = await compute()
        finally:
            self._pending = None
        self._report, self._started = report, started
        return report


def _memo(request: Request, context: AppContext) -> ReportMemo:
    """This app's memo (one per app, so in-process test apps over other databases never share it)."""
    memo: ReportMemo | None = getattr(request.app.state, "health_memo", None)
    if memo is None:
        memo = request.app.state.health_memo = ReportMemo(context.settings.health_cache_s)
    return memo


async def report(context: AppContext) -> dict[str, Any]:
    """The Health report from the feed-state table, as of now."""
    async with context.engine.connect() as conn:
        states = {row.feed: row for row in (await conn.execute(select(*FeedState.__table__.c))).all()}
    now = datetime.now(UTC)
    settings = context.settings
    max_age = {"catalog": settings.catalog_max_age_s, "marketplace": settings.marketplace_max_age_s}
    feeds: dict[str, Any] = {}
    for name in FEEDS:
        state = states.get(name)
        feeds[name] = {
            "status": feed_status(state, max_age[name], now),  # type: ignore[arg-type]
            "synced_at": _iso(state.synced_at) if state else None,
            "observed_on": state.observed_on if state and name != "catalog" else None,
        }
    synced = [state.synced_at for state in states.values() if state.synced_at is not None]
    healthy = all(feed["status"] == "ok" for feed in feeds.values())
    newest_price = feeds["marketplace"]["observed_on"]
    oldest_fine = (now.date() - timedelta(days=settings.marketplace_max_lag_days)).isoformat()
    if newest_price is None or newest_price < oldest_fine:  # ISO dates compare as strings
        healthy = False
    return {
        "status": "ok" if healthy else "degraded",
        "feeds": feeds,
        "last_updated": _iso(max(synced, key=lambda m: m if m.tzinfo else m.replace(tzinfo=UTC)))
        if synced
        else None,
    }


@router.get(
    "/health",
    response_model=Envelope[Health],
    responses={500: {"model": ErrorEnvelope, "description": "internal"}},
)
async def health(request: Request, context: Context) -> Response:
    body = await _memo(request, context).get(lambda: report(context))
    return data_response(request, body)
