"""Signed file URLs (issue 45, item 9) through the real server and the real `cardcat keys` CLI.

On a73d9a9 every bulk URL from `GET /v1/bulk` lived 30 days, named no key and kept working after the key
that listed it was revoked, and `/files` downloads were counted by nothing. Now:

- a bulk URL lives `CARDCAT_FILE_URL_TTL_S` (an hour, at most a quarter more) and carries the id of the
  key that asked, under the signature: swapping in another key's id, dropping it, or an old-style
  unbound signature answers `401`, like an expired URL;
- `cardcat keys revoke` (or the key's own expiry) turns that key's URLs into `403 unauthorized` at once,
  while another key's URLs for the same files keep working;
- downloads count: a bulk URL against its key's own `/v1` budget (`429` with `RateLimit` headers past
  it, and that key's `/v1` reads are refused too: one budget), an event's snapshot URL per address;
- snapshot URLs in events live two days (a day of delivery retries and a day to download), not 30.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from cardcat.stack import Service, launch
from catalog_api.access import file_access
from catalog_api.ingest.demo_catalog import write_demo_catalog
from catalog_api.kit.settings import Settings
from catalog_api.prices import snapshot_files as snapshots
from tests.catalog_api.helpers import failed, ok
from tests.catalog_api.test_prices import (
    NORMAL,
    card_row,
    prices_sync,
    product_row,
    snapshot_entries,
    write_feed,
)

HOUR = 3600


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("file-urls")
    service = launch("sqlite", tmp, write_demo_catalog(tmp / "catalog"))
    try:
        yield service
    finally:
        service.stop()


def settings_of(service: Service) -> Settings:
    """The deployment's settings as its server reads them (same data dir: same file secret)."""
    return Settings(data_dir=service.data_dir, database_url=service.db.url)


def local(service: Service, url: str) -> str:
    """The URL on this test's server (listings name the configured public base, not the test's port)."""
    return f"{service.base_url}/files/{url.split('/files/', 1)[1]}"


def bulk_urls(service: Service, key: str) -> dict[str, str]:
    """`GET /v1/bulk` as `key`: each kind's download URL, on this test's server."""
    with service.client(key) as client:
        return {item["kind"]: local(service, item["url"]) for item in ok(client.get("/v1/bulk"))["items"]}


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def with_query(url: str, **changes: str | None) -> str:
    query = {**query_of(url), **changes}
    base = url.split("?", 1)[0]
    return base + "?" + urlencode({name: value for name, value in query.items() if value is not None})


def key_id(service: Service, key: str) -> str:
    """The key's id, as the URLs it lists carry it."""
    return query_of(bulk_urls(service, key)["series"])["key"]


def test_bulk_urls_live_an_hour_and_name_the_key_that_asked(deployment: Service) -> None:
    """a73d9a9: `?expires=<30 days on>&signature=`, no key named."""
    first, second = deployment.quick_key(), deployment.quick_key()
    urls = bulk_urls(deployment, first)
    now = time.time()
    ids = {query_of(url)["key"] for url in urls.values()}
    assert len(ids) == 1 and ids != {key_id(deployment, second)}
    for url in urls.values():
        query = query_of(url)
        assert set(query) == {"expires", "key", "signature"}
        assert now + HOUR - 5 <= int(query["expires"]) <= now + 1.25 * HOUR + 5, "an hour, not 30 days"
        response = httpx.get(url, timeout=30)
        assert response.status_code == 200 and response.headers["content-type"] == "application/gzip"
        assert "limit=" in response.headers["RateLimit"] and "RateLimit-Policy" in response.headers
        assert gzip.decompress(response.content)


def test_a_revoked_or_expired_keys_urls_answer_403(deployment: Service) -> None:
    """a73d9a9: the URL answered 200 after `cardcat keys revoke` (and after the key expired)."""
    revoked, other = deployment.new_key("to-revoke"), deployment.quick_key()
    mine, theirs = bulk_urls(deployment, revoked)["cards"], bulk_urls(deployment, other)["cards"]
    assert httpx.get(mine, timeout=30).status_code == 200
    assert "revoked 1" in deployment.cli("keys", "revoke", revoked).stdout.lower()
    refused = httpx.get(mine, timeout=30)
    failed(refused, 403, "unauthorized")
    assert "WWW-Authenticate" not in refused.headers, "no Authorization header would help"
    assert httpx.get(theirs, timeout=30).status_code == 200, "another key's URL for the same file"

    expiring = deployment.new_key("short-lived", "--expires-in", "3")
    url = bulk_urls(deployment, expiring)["series"]
    assert httpx.get(url, timeout=30).status_code == 200
    time.sleep(3.5)
    failed(httpx.get(url, timeout=30), 403, "unauthorized")


def test_a_tampered_unbound_or_expired_url_is_refused(deployment: Service) -> None:
    mine, theirs = deployment.quick_key(), deployment.quick_key()
    url = bulk_urls(deployment, mine)["series"]
    assert httpx.get(url, timeout=30).status_code == 200
    query = query_of(url)
    name = url.split("?")[0].rsplit("/", 1)[1]
    settings = settings_of(deployment)
    expires = int(query["expires"])
    unbound = snapshots.sign(settings, f"bulk/{name}", expires)  # how a73d9a9 signed a bulk URL
    past = int(time.time()) - 1
    expired = file_access.sign_bound(settings, f"bulk/{name}", past, int(query["key"]))
    for bad in (
        with_query(url, key=key_id(deployment, theirs)),  # another (active) key's id
        with_query(url, key=None),
        with_query(url, key=None, signature=unbound),
        with_query(url, expires=str(expires + 1)),
        with_query(url, expires=str(past), signature=expired),
    ):
        failed(httpx.get(bad, timeout=30), 401, "unauthorized")


def fresh_window(service: Service, margin_s: float = 20) -> None:
    """Wait, if needed, until the fixed rate-limit window has at least `margin_s` seconds left."""
    with service.client() as client:
        reset = int(client.get("/v1/series").headers["RateLimit"].split("reset=")[1])
    if reset < margin_s:
        time.sleep(reset + 0.5)


def test_downloads_count_against_the_keys_budget_and_per_address(fresh: Any, tmp_path: Path) -> None:
    """a73d9a9: `/files` was outside every budget; a leaked URL could be fetched without bound."""
    service: Service = fresh("sqlite", write_demo_catalog(tmp_path / "catalog"), CARDCAT_RATE_LIMIT="3")
    mine, other = service.quick_key(), service.quick_key()
    fresh_window(service)
    url = bulk_urls(service, mine)["series"]  # the key's first request of the window
    remaining = [httpx.get(url, timeout=30).headers["RateLimit"] for _ in range(2)]
    assert [value.split(",")[1].strip() for value in remaining] == ["remaining=1", "remaining=0"]
    over = httpx.get(url, timeout=30)
    failed(over, 429, "rate_limited")
    assert 1 <= int(over.headers["Retry-After"]) <= 60 and "remaining=0" in over.headers["RateLimit"]
    with service.client(mine) as client:
        failed(client.get("/v1/series"), 429, "rate_limited")  # one budget for the key's reads and files
    assert httpx.get(bulk_urls(service, other)["series"], timeout=30).status_code == 200

    # An event's snapshot URL (no key): counted per client address, apart from every key's budget.
    settings = settings_of(service)
    name = "card_prices-2026-01-01-0123456789abcdef.ndjson.gz"
    settings.snapshot_dir.mkdir(parents=True, exist_ok=True)
    (settings.snapshot_dir / name).write_bytes(gzip.compress(b'{"card_id": "x"}\n'))
    expires = int(time.time()) + HOUR
    snapshot = f"{service.base_url}/files/snapshots/{name}?" + urlencode(
        {"expires": expires, "signature": snapshots.sign(settings, name, expires)}
    )
    fresh_window(service)
    statuses = [httpx.get(snapshot, timeout=30).status_code for _ in range(3)]
    over = httpx.get(snapshot, timeout=30)
    assert statuses == [200, 200, 200]
    failed(over, 429, "rate_limited")
    assert "Retry-After" in over.headers
    failed(httpx.get(snapshot.replace("signature=", "signature=0"), timeout=30), 401, "unauthorized")
    with service.client(other) as client:
        ok(client.get("/v1/series"))  # the address's downloads spent no key's budget


def test_event_snapshot_urls_live_two_days(deployment: Service, tmp_path: Path) -> None:
    """a73d9a9: 30 days (`CARDCAT_SNAPSHOT_URL_TTL_S`); now a day of delivery retries plus a day."""
    feed = write_feed(
        tmp_path / "feed",
        [card_row("emb1-1", NORMAL, "2026-09-01", 4321), product_row(900001, "2026-09-01", 7777)],
    )
    started = time.time()
    prices_sync(deployment, feed)
    entries = snapshot_entries(deployment)
    assert entries
    for entry in entries:
        query = query_of(entry["url"])
        assert set(query) == {"expires", "signature"}, "bound to no key: a receiver may hold none"
        assert started + 2 * 24 * HOUR - 5 <= int(query["expires"]) <= time.time() + 2 * 24 * HOUR + 5
        assert httpx.get(local(deployment, entry["url"]), timeout=30).status_code == 200
