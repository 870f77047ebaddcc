"""What `/metrics` answers: the counters every process wrote, plus gauges read from the database at
scrape time.

Feed ages and the webhook queue are facts of the database, not of a process: whichever worker (or the
separate metrics port) is scraped, and wherever the deliverer runs, a query at scrape time gives the true
value, where a gauge set by one process would be stale or duplicated in the others. Counters and
histograms come from prometheus_client: summed over every process's files in multiprocess mode
(`catalog_api.kit.metrics`), else this process's default registry.

The same queries run on an async connection (the `/metrics` route in a worker) and a sync one (the
metrics port of `cardcat serve`, `cardcat events deliver --metrics-port`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import Engine, case, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from catalog_api.batches import queue as batch_queue
from catalog_api.batches.tables import BatchPhoto, ScanBatch
from catalog_api.events.tables import Delivery, Event, WebhookEndpoint
from catalog_api.kit.metrics import multiprocess_dir
from catalog_api.kit.models import FeedState
from catalog_api.kit.settings import Settings

log = logging.getLogger("cardcat.metrics")
FEEDS = ("catalog", "marketplace")

_FEEDS_QUERY = select(FeedState.feed, FeedState.synced_at, FeedState.observed_on)
# Undelivered deliveries, split by whether their endpoint is active or disabled (paused until enabled).
_active = case((WebhookEndpoint.disabled_at.is_(None), 1), else_=0).label("active")
_QUEUE_QUERY = (
    select(_active, func.count(Delivery.id), func.min(Event.created_at))
    .join(WebhookEndpoint, WebhookEndpoint.id == Delivery.endpoint_id)
    .join(Event, Event.seq == Delivery.event_seq)
    .where(Delivery.delivered_at.is_(None))
    .group_by(_active)
)

# Batch photos still to answer in unfinished batches: waiting for a worker, or leased to one.
_BATCH_QUERY = (
    select(BatchPhoto.state, func.count(BatchPhoto.id))
    .join(ScanBatch, ScanBatch.id == BatchPhoto.batch_id)
    .where(
        ScanBatch.status.in_(batch_queue.ACTIVE),
        BatchPhoto.state.in_((batch_queue.PENDING, batch_queue.LEASED)),
    )
    .group_by(BatchPhoto.state)
)

# The names this module exports (for the dashboard's check; the rest are in `kit.metrics.DECLARED`).
SCRAPED_NAMES = (
    "cardcat_feed_age_seconds",
    "cardcat_feed_last_sync_timestamp_seconds",
    "cardcat_feed_synced",
    "cardcat_feed_max_age_seconds",
    "cardcat_marketplace_newest_price_age_days",
    "cardcat_webhook_queue_depth",
    "cardcat_webhook_queue_oldest_age_seconds",
    "cardcat_metrics_database_up",
    "cardcat_batch_queue_depth",
)


@dataclass(frozen=True)
class DatabaseState:
    """The rows the scrape-time gauges are made from (None: the database did not answer)."""

    feeds: Sequence[Any] | None
    queue: Sequence[Any] | None
    batches: Sequence[Any] | None = None


async def read_state_async(engine: AsyncEngine) -> DatabaseState:
    try:
        async with engine.connect() as conn:
            feeds = (await conn.execute(_FEEDS_QUERY)).all()
            queue = (await conn.execute(_QUEUE_QUERY)).all()
            batches = (await conn.execute(_BATCH_QUERY)).all()
        return DatabaseState(feeds, queue, batches)
    except Exception as exc:  # a scrape must still answer the process counters when the database is down
        log.warning("metrics: database state unavailable: %s", exc)
        return DatabaseState(None, None)


def read_state(engine: Engine) -> DatabaseState:
    try:
        with engine.connect() as conn:
            feeds = conn.execute(_FEEDS_QUERY).all()
            queue = conn.execute(_QUEUE_QUERY).all()
            batches = conn.execute(_BATCH_QUERY).all()
        return DatabaseState(feeds, queue, batches)
    except Exception as exc:
        log.warning("metrics: database state unavailable: %s", exc)
        return DatabaseState(None, None)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def database_families(state: DatabaseState, settings: Settings, now: datetime | None = None) -> list[Metric]:
    """Gauges for the feeds (the same rules as `/health`) and the webhook queue."""
    now = now or datetime.now(UTC)
    up = GaugeMetricFamily(
        "cardcat_metrics_database_up", "1 when the scrape could read the database (feeds, webhook queue)."
    )
    up.add_metric([], 0 if state.feeds is None else 1)
    families: list[Metric] = [up]
    if state.feeds is not None:
        families += _feed_families(state.feeds, settings, now)
    if state.queue is not None:
        families += _queue_families(state.queue, now)
    if state.batches is not None:
        families.append(_batch_family(state.batches))
    return families


def _batch_family(rows: Iterable[Any]) -> Metric:
    depth = GaugeMetricFamily(
        "cardcat_batch_queue_depth",
        "Scan batch photos not answered yet in unfinished batches: `waiting` for a worker, or `scanning`.",
        labels=["state"],
    )
    counts = {"waiting": 0, "scanning": 0}
    for state, count in rows:
        counts["scanning" if state == batch_queue.LEASED else "waiting"] += int(count)
    for state, count in counts.items():
        depth.add_metric([state], count)
    return depth


def _feed_families(rows: Iterable[Any], settings: Settings, now: datetime) -> list[Metric]:
    by_feed = {row.feed: row for row in rows}
    synced = GaugeMetricFamily(
        "cardcat_feed_synced", "1 when the feed has synced at least once.", labels=["feed"]
    )
    age = GaugeMetricFamily(
        "cardcat_feed_age_seconds", "Seconds since the feed's last successful sync.", labels=["feed"]
    )
    last = GaugeMetricFamily(
        "cardcat_feed_last_sync_timestamp_seconds",
        "Unix time of the feed's last successful sync.",
        labels=["feed"],
    )
    allowance = GaugeMetricFamily(
        "cardcat_feed_max_age_seconds",
        "The age past which /health calls the feed stale (CARDCAT_CATALOG_MAX_AGE_S, "
        "CARDCAT_MARKETPLACE_MAX_AGE_S).",
        labels=["feed"],
    )
    max_age = {"catalog": settings.catalog_max_age_s, "marketplace": settings.marketplace_max_age_s}
    for feed in FEEDS:
        row = by_feed.get(feed)
        allowance.add_metric([feed], max_age[feed])
        synced.add_metric([feed], 0 if row is None or row.synced_at is None else 1)
        if row is not None and row.synced_at is not None:
            moment = _utc(row.synced_at)
            age.add_metric([feed], max(0.0, (now - moment).total_seconds()))
            last.add_metric([feed], moment.timestamp())
    families: list[Metric] = [synced, age, last, allowance]
    market = by_feed.get("marketplace")
    if market is not None and market.observed_on:
        lag = GaugeMetricFamily(
            "cardcat_marketplace_newest_price_age_days",
            "Days between today (UTC) and the newest price the marketplace feed holds.",
        )
        lag.add_metric([], (now.date() - date.fromisoformat(market.observed_on)).days)
        families.append(lag)
    return families


def _queue_families(rows: Iterable[Any], now: datetime) -> list[Metric]:
    depth = GaugeMetricFamily(
        "cardcat_webhook_queue_depth",
        "Undelivered webhook deliveries: `active` (their endpoint is enabled: being sent or retried) or "
        "`paused` (their endpoint is disabled; they resume when it is enabled).",
        labels=["state"],
    )
    oldest = GaugeMetricFamily(
        "cardcat_webhook_queue_oldest_age_seconds",
        "Age of the oldest event still owed to an endpoint, by the endpoint's state.",
        labels=["state"],
    )
    counts = {"active": 0, "paused": 0}
    for active, count, first in rows:
        state = "active" if active else "paused"
        counts[state] = int(count)
        if first is not None:
            oldest.add_metric([state], max(0.0, (now - _utc(first)).total_seconds()))
    for state, count in counts.items():
        depth.add_metric([state], count)
    return [depth, oldest]


class _Families:
    """A collector of families made beforehand (the database was read before the exposition)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


def process_metrics() -> Collector:
    """The counters and histograms: every process's, summed (multiprocess mode), else this process's."""
    directory = multiprocess_dir()
    if directory is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, directory)
    return registry


def exposition(state: DatabaseState, settings: Settings) -> bytes:
    """The Prometheus text of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Joined(process_metrics(), _Families(database_families(state, settings))))
    return generate_latest(registry)


class _Joined:
    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


class DatabaseCollector:
    """For a sync exposition server (prometheus_client's `start_http_server`): the process metrics and
    the database gauges, read at each scrape."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine, self.settings = engine, settings

    def collect(self) -> Iterator[Metric]:
        yield from process_metrics().collect()
        yield from database_families(read_state(self.engine), self.settings)


def serve_metrics_port(engine: Engine, settings: Settings, host: str, port: int) -> None:
    """Serve `/metrics` on its own port from a thread of this process (`CARDCAT_METRICS_PORT`)."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(engine, settings))
    start_http_server(port, addr=host, registry=registry)
