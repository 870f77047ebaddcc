"""The client's retries against real failures: a low rate limit (429 + `Retry-After`), a database
outage behind the real server (500 `internal` + `Retry-After`), a scan on a deployment without a
scanner (503, never retried: a POST), and a port nobody listens on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.outages import PrivatePostgres
from cardcat.stack import Database, Service, free_port
from cardcat_client import CardcatClient, CardcatConnectionError, CardcatError
from tests.catalog_api.helpers import ok


class Wire:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def __call__(self, response: httpx.Response) -> None:
        self.seen.append((response.request.method, response.status_code))

    @property
    def statuses(self) -> list[int]:
        return [status for _, status in self.seen]


def watched(service: Service, key: str, **options: Any) -> tuple[CardcatClient, Wire, httpx.Client]:
    wire = Wire()
    http = httpx.Client(event_hooks={"response": [wire]}, timeout=30)
    return CardcatClient(service.base_url, api_key=key, http_client=http, **options), wire, http


def test_429_is_retried_after_retry_after(fresh: Any, feed_dir: Path) -> None:
    svc = fresh("sqlite", feed_dir, CARDCAT_RATE_LIMIT="3", CARDCAT_RATE_WINDOW_S="2")
    cat, wire, http = watched(svc, svc.quick_key(), max_retries=5, max_retry_wait=5)
    with http, cat:
        started = time.monotonic()
        names = [next(cat.series(limit=1)).name for _ in range(8)]
        elapsed = time.monotonic() - started
    assert len(set(names)) == 1
    limited = wire.statuses.count(429)
    answered = [status for status in wire.statuses if status in (200, 304)]  # 304: the ETag cache
    assert limited >= 1 and len(answered) == 8 and len(wire.statuses) == 8 + limited, wire.statuses
    assert cat.stats.retries == limited
    assert elapsed >= 1.0, "it waited for the window to roll rather than hammering"


def test_429_retries_are_bounded(fresh: Any, feed_dir: Path) -> None:
    svc = fresh("sqlite", feed_dir, CARDCAT_RATE_LIMIT="2", CARDCAT_RATE_WINDOW_S="30")
    key = svc.quick_key()
    with svc.client(key) as raw:  # the first of the two, early enough in a window that it cannot roll
        first = raw.get("/v1/series")
        if int(first.headers["RateLimit"].split("reset=")[1]) < 10:
            time.sleep(int(first.headers["RateLimit"].split("reset=")[1]) + 0.5)
            first = raw.get("/v1/series")
        ok(first)
    cat, wire, http = watched(svc, key, max_retries=0)
    with http, cat:
        cat.health()  # /health is not counted
        next(cat.series())
        with pytest.raises(CardcatError) as no_retries:
            next(cat.series())
    assert (no_retries.value.status, no_retries.value.code) == (429, "rate_limited")
    assert no_retries.value.retry_after is not None and 1 <= no_retries.value.retry_after <= 30
    assert wire.statuses.count(429) == 1

    cat, wire, http = watched(svc, key, max_retries=5, max_retry_wait=0.5)  # the window is longer
    with http, cat:
        started = time.monotonic()
        with pytest.raises(CardcatError) as too_long:
            cat.expansion("base1")
        assert time.monotonic() - started < 1.0, "a wait over max_retry_wait is not waited"
    assert too_long.value.code == "rate_limited" and wire.statuses == [429] and cat.stats.retries == 0


def test_a_scan_is_not_retried_on_a_server_error(fresh: Any, feed_dir: Path) -> None:
    """No scanner here: 503 `scan_unavailable`. A POST is sent once, whatever the status."""
    svc = fresh("sqlite", feed_dir)
    cat, wire, http = watched(svc, svc.quick_key(), max_retries=3, backoff_base=0.01)
    with http, cat, pytest.raises(CardcatError) as unavailable:
        cat.scan(b"\xff\xd8\xff" + b"\0" * 64)
    assert (unavailable.value.status, unavailable.value.code) == (503, "scan_unavailable")
    assert wire.seen == [("POST", 503)] and cat.stats.retries == 0


def test_a_lost_connection_is_retried_for_reads_only() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with CardcatClient(url, api_key="cc_x", max_retries=2, backoff_base=0.01) as cat:
        with pytest.raises(CardcatConnectionError) as read:
            cat.health()
        assert (read.value.status, read.value.code) == (0, "connection_error")
        assert cat.stats.retries == 2
        with pytest.raises(CardcatConnectionError):
            cat.scan(b"photo")
        assert cat.stats.retries == 2, "a scan is not resent"


@pytest.fixture
def outage_service(tmp_path: Path) -> Iterator[tuple[Service, PrivatePostgres]]:
    from catalog_api.ingest.demo_catalog import write_demo_catalog

    postgres = PrivatePostgres()
    service = Service(Database(postgres.url, "postgresql"), tmp_path / "data")
    try:
        service.cli("db", "upgrade")
        service.cli("catalog", "sync", "--from", str(write_demo_catalog(tmp_path / "feed")), "--quiet")
        service.start()
        yield service, postgres
    finally:
        service.stop()
        postgres.close()


def test_a_5xx_is_retried_with_backoff_until_the_database_is_back(
    outage_service: tuple[Service, PrivatePostgres],
) -> None:
    service, postgres = outage_service
    key = service.quick_key()
    with service.client(key) as raw:
        card_ids = [row["id"] for row in ok(raw.get("/v1/cards", params={"limit": 20}))["items"]]
        ok(raw.get("/v1/series"))  # the key is verified (and trusted for a while) before the outage
    cat, wire, http = watched(service, key, max_retries=8, backoff_base=0.2, backoff_cap=1.0)
    postgres.stop()
    restart = threading.Timer(2.5, postgres.start)
    restart.start()
    try:
        with http, cat:
            card = cat.card(card_ids[-1])  # never read before: not in the server's read cache
    finally:
        restart.join()
    assert card.id == card_ids[-1]
    assert wire.statuses[-1] == 200 and set(wire.statuses[:-1]) == {500}, wire.statuses
    assert 1 <= cat.stats.retries == len(wire.statuses) - 1 <= 8
