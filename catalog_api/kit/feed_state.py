"""Feed state: one row per upstream feed saying when it last synced and which data version it made.

Both ingesters (catalog and prices) write it and every read cache keys on its version, so it sits in
the kit rather than in either ingester (the price sync used to import the catalog sync for it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from catalog_api.kit.models import FeedState


def mark_synced(
    session: Session, feed_name: str, changed: bool, details: dict[str, Any], observed_on: str | None = None
) -> None:
    """Record a successful sync of one feed; a change (or the first sync) moves its version, which is
    what every worker's read cache and snapshot key on."""
    state = session.get(FeedState, feed_name)
    if state is None:
        state = FeedState(feed=feed_name, version=0)
        session.add(state)
    state.synced_at = datetime.now(UTC)
    state.observed_on = observed_on
    if changed or state.version == 0:
        state.version = (state.version or 0) + 1
    state.details = details
