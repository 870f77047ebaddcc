"""`GET /metrics` against the real `cardcat serve`: several uvicorn workers and the event deliverer count
into one multiprocess directory, and any scrape shows all of them.

A scripted mix (reads, 404s, a 405, 401s, 429s for a key and for an address, a scan without a scanner,
a catalog sync whose events one receiver takes after two failures and another refuses with 410) must
move every counter and histogram by exactly what was sent; route labels are templates, never raw paths;
the feed and webhook-queue gauges follow the database. The scans through the real scanner (outcomes and
stage latencies, also through Ray's metrics) are in tests/serve_app/test_scan_metrics.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from benchmarks.metrics_text import Scrape
from cardcat.stack import CARDCAT, Service, create_database, free_port
from catalog_api.events.endpoints import add_endpoint
from catalog_api.events.secret_box import webhook_box
from catalog_api.ingest.demo_catalog import write_demo_catalog
from catalog_api.kit.db import make_engine
from catalog_api.kit.settings import Settings
from catalog_api.prices.demo_prices import write_demo_prices
from tests.catalog_api.helpers import eventually, failed, ok
from tests.catalog_api.test_events import ENV as WEBHOOK_ENV
from tests.catalog_api.test_events import Receiver

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "cardcat.json"
LIMIT = 15  # a small budget, so 429s come quickly (counted per worker: no Redis here)


def deployment(tmp: Path, backend: str, workers: int, **env: str) -> tuple[Service, str]:
    service = Service(
        create_database(backend, tmp),
        tmp / "data",
        {**WEBHOOK_ENV, "CARDCAT_DELIVER_EVENTS": "true", "CARDCAT_RATE_LIMIT": str(LIMIT), **env},
    )
    service.cli("db", "upgrade")
    try:
        url = service.start("--workers", str(workers))
    except BaseException:
        service.stop()
        raise
    return service, url


@pytest.fixture(params=[("postgresql", 2), ("sqlite", 1)], ids=["postgresql-2-workers", "sqlite-1-worker"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Service, str, int]]:
    backend, workers = request.param
    service, url = deployment(tmp_path, backend, workers)
    yield service, url, workers
    service.stop()


def subscribe(service: Service, receiver: Receiver) -> int:
    settings = Settings(database_url=service.db.url, data_dir=service.data_dir)
    engine = make_engine(settings)
    try:
        endpoint_id, receiver.secret = add_endpoint(engine, receiver.url, True, webhook_box(settings))
    finally:
        engine.dispose()
    return endpoint_id


def count(service: Service, query: str) -> int:
    engine = make_engine(Settings(database_url=service.db.url, data_dir=service.data_dir))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(query)).scalar_one())
    finally:
        engine.dispose()


def get(url: str, path: str, key: str | None = None, method: str = "GET") -> httpx.Response:
    """One request on a connection of its own, so the workers take turns answering."""
    headers = {"Connection": "close", **({"Authorization": f"Bearer {key}"} if key else {})}
    return httpx.request(method, url + path, headers=headers, timeout=30)


def delta(after: Scrape, before: Scrape, name: str, **labels: str) -> float:
    return after.sum(name, **labels) - before.sum(name, **labels)


def dashboard_metrics() -> set[str]:
    from tests.test_grafana_dashboard import metric_names

    return metric_names(json.loads(DASHBOARD.read_text()))


def test_a_scripted_mix_moves_every_counter_and_histogram(
    served: tuple[Service, str, int], tmp_path: Path, wait_for_fresh_window: Any
):
    service, url, workers = served
    metrics = f"{url}/metrics"
    before = Scrape.get(metrics)
    assert before.sum("cardcat_metrics_database_up") == 1
    assert before.sum("cardcat_feed_synced", feed="catalog") == 0
    assert before.sum("cardcat_webhook_queue_depth", state="active") == 0

    # Events: one receiver fails twice then takes everything; another answers 410 (endpoint disabled).
    good, gone = Receiver(fail_first=2).start(), Receiver(status=410).start()
    try:
        subscribe(service, good)
        gone_id = subscribe(service, gone)
        synced_at = time.time()
        feed = write_demo_catalog(tmp_path / "feed")
        service.cli("catalog", "sync", "--from", str(feed), "--quiet")
        prices = write_demo_prices(feed, tmp_path / "prices")
        service.cli("prices", "sync", "--from", str(prices), "--quiet")
        owed = count(service, "SELECT count(*) FROM events")
        assert owed > 0
        eventually(lambda: _assert(len(good.accepted()) == owed), timeout=30)
        eventually(lambda: _assert(len(gone.received) == 1), timeout=10)
        # `gone` is owed what was written before the deliverer disabled it (a race with the syncs).
        paused = count(service, f"SELECT count(*) FROM deliveries WHERE endpoint_id = {gone_id}")
        assert paused > 0
    finally:
        good.stop()
        gone.stop()

    reader, burster = service.quick_key(), service.quick_key()
    # The budgets are fixed windows: the reads and both bursts below must not straddle a window's end.
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {reader}"}) as client:
        wait_for_fresh_window(client, "/v1/movers?limit=1")  # a route no count below asserts
    card_id = ok(get(url, "/v1/cards?limit=1", reader))["items"][0]["id"]
    for _ in range(6):
        ok(get(url, "/v1/series", reader))
    ok(get(url, f"/v1/cards/{card_id}", reader))
    failed(get(url, "/v1/cards/nope-404", reader), 404, "not_found")
    failed(get(url, "/v1/nothing-here", reader), 404, "not_found")
    failed(get(url, "/v1/cards/a/b/c", reader), 404, "not_found")
    assert get(url, "/v1/cards", reader, method="POST").status_code == 405
    failed(get(url, "/v1/scan", reader, method="POST"), 503, "scan_unavailable")
    failed(get(url, "/v1/series"), 401, "unauthorized")
    # Each worker counts its own budget (no Redis): workers * LIMIT + 1 requests must meet a 429.
    key_statuses = [get(url, "/v1/expansions", burster).status_code for _ in range(workers * LIMIT + 1)]
    anon_statuses = [get(url, "/v1/expansions").status_code for _ in range(workers * LIMIT + 1)]
    assert 429 in key_statuses and set(key_statuses) <= {200, 429}, key_statuses
    assert 429 in anon_statuses and set(anon_statuses) <= {401, 429}, anon_statuses

    for _ in range(3):  # whichever worker answers, the same totals
        after = Scrape.get(metrics)
        requests = "cardcat_http_requests_total"
        assert delta(after, before, requests, method="GET", route="/v1/series", status="200") == 6
        assert delta(after, before, requests, method="GET", route="/v1/series", status="401") == 1
        assert delta(after, before, requests, method="GET", route="/v1/cards/{card_id}", status="200") == 1
        assert delta(after, before, requests, method="GET", route="/v1/cards/{card_id}", status="404") == 1
        assert delta(after, before, requests, method="GET", route="unmatched", status="404") == 2
        assert delta(after, before, requests, method="POST", route="/v1/cards", status="405") == 1
        assert delta(after, before, requests, method="POST", route="/v1/scan", status="503") == 1
        limited = key_statuses.count(429) + anon_statuses.count(429)
        assert delta(after, before, requests, route="/v1/expansions", status="429") == limited
        expansions = "/v1/expansions"
        assert delta(after, before, requests, route=expansions, status="200") == key_statuses.count(200)
        assert delta(after, before, requests, route=expansions, status="401") == anon_statuses.count(401)
        assert delta(after, before, "cardcat_rate_limited_total", bucket="key") == key_statuses.count(429)
        assert delta(after, before, "cardcat_rate_limited_total", bucket="anonymous") == anon_statuses.count(
            429
        )
        latency = "cardcat_http_request_duration_seconds"
        assert delta(after, before, f"{latency}_count", method="GET", route="/v1/series") == 7
        assert delta(after, before, f"{latency}_bucket", method="GET", route="/v1/series", le="+Inf") == 7
        assert delta(after, before, f"{latency}_sum", method="GET", route="/v1/series") > 0
        assert delta(after, before, "cardcat_scans_total", outcome="error") == 1
        assert delta(after, before, "cardcat_scan_errors_total", code="scan_unavailable") == 1

        # Webhooks: every event delivered to `good` after two failed attempts; `gone` refused once and
        # was disabled, so all its deliveries wait (paused) in the queue.
        deliveries = "cardcat_webhook_deliveries_total"
        assert delta(after, before, deliveries, result="delivered") == owed
        assert delta(after, before, deliveries, result="retry") == 2
        assert delta(after, before, deliveries, result="disabled") == 1
        assert delta(after, before, "cardcat_webhook_failures_total", kind="http_status") == 3
        assert delta(after, before, "cardcat_webhook_post_duration_seconds_count") == owed + 3
        assert after.sum("cardcat_webhook_queue_depth", state="paused") == paused
        assert after.sum("cardcat_webhook_queue_depth", state="active") == 0
        assert after.sum("cardcat_webhook_queue_oldest_age_seconds", state="paused") >= 0

        # Feeds: both synced a moment ago (before: never); the demo prices end today.
        for name in ("catalog", "marketplace"):
            assert after.sum("cardcat_feed_synced", feed=name) == 1
            assert 0 <= after.sum("cardcat_feed_age_seconds", feed=name) < time.time() - synced_at + 5
            assert abs(after.sum("cardcat_feed_last_sync_timestamp_seconds", feed=name) - synced_at) < 120
        assert after.sum("cardcat_marketplace_newest_price_age_days") in (0, 1)
        assert before.sum("cardcat_feed_synced", feed="marketplace") == 0

    # Labels are templates: no raw path, whatever was asked.
    routes = after.labels("cardcat_http_requests_total", "route")
    assert not {route for route in routes if "nope" in route or "nothing" in route or card_id in route}
    assert "/v1/cards/{card_id}" in routes and "unmatched" in routes
    # Every process that counted wrote its own files: the workers and the deliverer.
    pids = {path.stem.rsplit("_", 1)[1] for path in (service.data_dir / "metrics").glob("*/counter_*.db")}
    assert len(pids) >= workers + 1, pids
    # Every metric the Grafana dashboard queries is in a real scrape, but Ray's (scraped from Ray).
    exported = after.families | after.sample_names()
    missing = {name for name in dashboard_metrics() if not name.startswith("ray_") and name not in exported}
    assert not missing, missing
    # Fixed label values exist from the start, at zero.
    assert after.sum("cardcat_scans_total", outcome="race") == 0  # no scanner here: no race
    assert ("cardcat_scans_total", frozenset({("outcome", "race")})) in before.samples
    assert ("cardcat_scan_stage_seconds_count", frozenset({("stage", "read")})) in before.samples
    # Not part of the API document, and no key needed.
    assert "/metrics" not in httpx.get(f"{url}/openapi.json").json()["paths"]


def test_metrics_on_their_own_port(tmp_path: Path):
    """CARDCAT_METRICS_PORT: `cardcat serve` answers /metrics there, summing its workers' counts; the
    API port no longer has it."""
    port = free_port()
    service, url = deployment(tmp_path, "sqlite", 2, CARDCAT_METRICS_PORT=str(port))
    try:
        key = service.quick_key()
        for _ in range(4):
            ok(get(url, "/v1/series", key))
        assert get(url, "/metrics").status_code == 404
        scrape = Scrape.get(f"http://127.0.0.1:{port}/metrics")
        assert scrape.sum("cardcat_http_requests_total", route="/v1/series", status="200") == 4
        assert scrape.sum("cardcat_http_requests_total", route="unmatched", status="404") == 1
        assert scrape.sum("cardcat_http_request_duration_seconds_count", route="/health") >= 1
        assert scrape.sum("cardcat_metrics_database_up") == 1
        assert scrape.sum("cardcat_feed_synced", feed="catalog") == 0
    finally:
        service.stop()


def test_a_deliverer_on_its_own_serves_its_metrics(tmp_path: Path):
    """`cardcat events deliver --metrics-port`: a deliverer with no server beside it (another host, its
    own pod) answers its own counts and the queue gauges."""
    service = Service(create_database("sqlite", tmp_path), tmp_path / "data", dict(WEBHOOK_ENV))
    service.cli("db", "upgrade")
    receiver = Receiver(fail_first=1).start()
    subscribe(service, receiver)
    service.cli("catalog", "sync", "--from", str(write_demo_catalog(tmp_path / "feed")), "--quiet")
    owed = count(service, "SELECT count(*) FROM events")
    port = free_port()
    command = [*CARDCAT, "events", "deliver", "--metrics-port", str(port)]
    deliverer = subprocess.Popen(
        command, env=service.env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        eventually(lambda: _assert(len(receiver.accepted()) == owed), timeout=30)

        def delivered() -> Scrape:
            scrape = Scrape.get(f"http://127.0.0.1:{port}/metrics")
            assert scrape.sum("cardcat_webhook_deliveries_total", result="delivered") == owed
            return scrape

        scrape = eventually(delivered, timeout=10)
        assert scrape.sum("cardcat_webhook_deliveries_total", result="retry") == 1
        assert scrape.sum("cardcat_webhook_failures_total", kind="http_status") == 1
        assert scrape.sum("cardcat_webhook_queue_depth", state="active") == 0
        assert scrape.sum("cardcat_feed_synced", feed="catalog") == 1
    finally:
        deliverer.terminate()
        deliverer.wait(30)
        receiver.stop()


def _assert(condition: bool) -> None:
    assert condition
