"""`GET /health`: no key, the spec's Health report, and the feed states documented in `routes/health.py`
(`never_synced`, `stale`, `ok`; the service is `degraded` while any feed is not `ok`). This build has no
marketplace sync yet, so the marketplace feed reads `never_synced` and the service `degraded` throughout.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog_api.schemas import Envelope, Health
from tests.harness import Service

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
    after = health(service)
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
