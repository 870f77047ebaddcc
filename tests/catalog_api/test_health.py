"""`GET /health`: no key, the spec's Health report, and the rules documented in `routes/health.py`:
feed status `never_synced`, `stale` or `ok`; the service is `degraded` while any feed is not `ok`, and
also while every feed is `ok` but the newest price is days old (synced, but nothing new published).
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import Service
from catalog_api.kit.schemas import Envelope
from catalog_api.ops.schemas import Health
from catalog_api.prices.demo_prices import write_demo_prices
from tests.catalog_api.helpers import eventually

BACKENDS = ["postgresql", "sqlite"]


def health(service: Service, **headers: str) -> dict[str, Any]:
    response = httpx.get(f"{service.base_url}/health", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    Envelope[Health].model_validate(body)
    assert set(body["data"]) == {"status", "feeds", "last_updated"}
    assert set(body["data"]["feeds"]) == {"catalog", "marketplace"}
    for feed in body["data"]["feeds"].values():
        assert set(feed) == {"status", "synced_at", "observed_on"}
    report: dict[str, Any] = body["data"]
    return report


def utc(timestamp: str) -> datetime:
    """An ISO 8601 timestamp that names UTC (`Z` or `+00:00`)."""
    moment = datetime.fromisoformat(timestamp)
    assert moment.tzinfo is not None and moment.utcoffset() == timedelta(0), timestamp
    return moment


def test_health_needs_no_key(service: Service) -> None:
    health(service)
    # A key that would be refused on /v1 changes nothing here.
    health(service, Authorization="Bearer not-a-key")
    health(service, Authorization=f"Bearer {service.key}")


def test_health_after_the_catalog_synced(service: Service) -> None:
    report = health(service)
    catalog, marketplace = report["feeds"]["catalog"], report["feeds"]["marketplace"]
    assert catalog["status"] == "ok"
    assert catalog["observed_on"] is None  # the catalog feed carries no prices
    synced = utc(catalog["synced_at"])
    assert synced <= datetime.now(UTC) + timedelta(seconds=5)
    assert report["last_updated"] is not None and utc(report["last_updated"]) == synced
    # No marketplace sync exists in this build: never synced, so the service is degraded.
    assert marketplace == {"status": "never_synced", "synced_at": None, "observed_on": None}
    assert report["status"] == "degraded"


@pytest.mark.parametrize("backend", BACKENDS)
def test_health_before_and_after_the_first_sync(backend: str, fresh: Any, feed_dir: Path) -> None:
    service = fresh(backend)
    before = health(service)
    assert before["last_updated"] is None
    assert before["feeds"]["catalog"] == {"status": "never_synced", "synced_at": None, "observed_on": None}
    assert before["status"] == "degraded"

    started = datetime.now(UTC)
    service.cli("catalog", "sync", "--from", str(feed_dir), "--quiet")
    finished = datetime.now(UTC)

    def synced_report() -> dict[str, Any]:
        report = health(service)
        assert report["feeds"]["catalog"]["status"] == "ok", report
        return report

    # /health is computed at most once a second per worker (CARDCAT_HEALTH_CACHE_S): a sync faster than
    # that (this feed on SQLite, on a fast CPU) is seen once the "before" report has aged out.
    after = eventually(synced_report, timeout=5, interval=0.2)
    catalog = after["feeds"]["catalog"]
    assert catalog["status"] == "ok" and catalog["observed_on"] is None
    synced = utc(catalog["synced_at"])
    slack = timedelta(seconds=2)
    assert started - slack <= synced <= finished + slack, (started, synced, finished)
    assert utc(after["last_updated"]) == synced
    assert after["feeds"]["marketplace"]["status"] == "never_synced"
    assert after["status"] == "degraded"


def test_catalog_older_than_its_allowance_is_stale(fresh: Any, feed_dir: Path) -> None:
    service = fresh("sqlite", feed_dir, CARDCAT_CATALOG_MAX_AGE_S="1")
    time.sleep(1.5)
    report = health(service)
    catalog = report["feeds"]["catalog"]
    assert catalog["status"] == "stale"
    assert catalog["synced_at"] is not None and utc(report["last_updated"]) == utc(catalog["synced_at"])
    assert report["status"] == "degraded"


def sync_prices(service: Service, catalog: Path, out: Path, end: date) -> None:
    service.cli("prices", "sync", "--from", str(write_demo_prices(catalog, out, days=3, end=end)), "--quiet")


@pytest.mark.parametrize("backend", BACKENDS)
def test_current_prices_make_the_service_ok(backend: str, fresh: Any, feed_dir: Path, tmp_path: Path) -> None:
    service = fresh(backend, feed_dir)
    today = datetime.now(UTC).date()
    sync_prices(service, feed_dir, tmp_path / "prices", today)
    report = health(service)
    marketplace = report["feeds"]["marketplace"]
    assert marketplace["status"] == "ok" and marketplace["observed_on"] == today.isoformat()
    assert utc(report["last_updated"]) == utc(marketplace["synced_at"])
    assert report["status"] == "ok"


def test_synced_but_old_prices_degrade_while_every_feed_reads_ok(
    fresh: Any, feed_dir: Path, tmp_path: Path
) -> None:
    service = fresh("sqlite", feed_dir)
    old = datetime.now(UTC).date() - timedelta(days=10)
    sync_prices(service, feed_dir, tmp_path / "prices", old)
    report = health(service)
    assert {feed["status"] for feed in report["feeds"].values()} == {"ok"}
    # A recent synced_at beside an old observed_on: nothing newer was published upstream.
    marketplace = report["feeds"]["marketplace"]
    assert marketplace["observed_on"] == old.isoformat()
    assert utc(marketplace["synced_at"]) > datetime.now(UTC) - timedelta(minutes=5)
    assert report["status"] == "degraded"


def test_marketplace_older_than_its_allowance_is_stale(fresh: Any, feed_dir: Path, tmp_path: Path) -> None:
    service = fresh("sqlite", feed_dir, CARDCAT_MARKETPLACE_MAX_AGE_S="1")
    sync_prices(service, feed_dir, tmp_path / "prices", datetime.now(UTC).date())
    time.sleep(1.5)
    report = health(service)
    assert report["feeds"]["marketplace"]["status"] == "stale"
    assert report["feeds"]["catalog"]["status"] == "ok"
    assert report["status"] == "degraded"


def test_health_queries_the_database_at_most_once_a_second_per_worker(tmp_path: Path) -> None:
    """Reproduces #45 item 7: every `/health` poll (no key needed, so anyone's) was a feed-state query
    (~990 a second). The real app under real uvicorn in this process, its engine's statements counted:
    two polls in a row and a burst of 20 concurrent ones within the cache's second are one query, the
    cached report keeps its ETag and 304, and a poll after the second queries again."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import event

    from cardcat.stack import ServerThread, create_database
    from catalog_api.app import create_app
    from catalog_api.kit.settings import Settings

    database = create_database("sqlite", tmp_path)
    Service(database, tmp_path / "data").cli("db", "upgrade")
    ttl = 2.0  # the default is 1 s; 2 leaves a loaded machine time to send the burst inside one period
    app = create_app(Settings(database_url=database.url, data_dir=tmp_path / "data", health_cache_s=ttl))
    queries: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "feed_state" in statement:
            queries.append(statement)

    event.listen(app.state.context.engine.sync_engine, "before_cursor_execute", count)
    with ServerThread(app) as server, httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client:
        first_at = time.monotonic()
        first = client.get("/health")
        second = client.get("/health")
        assert time.monotonic() - first_at < ttl, "too slow to test within one cache period"
        assert first.status_code == second.status_code == 200
        assert first.content == second.content and first.headers["etag"] == second.headers["etag"]
        assert len(queries) == 1, queries
        unchanged = client.get("/health", headers={"If-None-Match": first.headers["etag"]})
        assert unchanged.status_code == 304 and unchanged.headers["etag"] == first.headers["etag"]

        time.sleep(ttl + 0.1)
        with ThreadPoolExecutor(20) as pool:
            burst = list(pool.map(lambda _: httpx.get(f"http://127.0.0.1:{server.port}/health"), range(20)))
        assert {response.status_code for response in burst} == {200}
        assert len(queries) == 2, queries  # the expired report was recomputed once for the whole burst
