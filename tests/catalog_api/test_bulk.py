"""`GET /v1/bulk` and its files, through the real server on PostgreSQL and SQLite.

Every file is downloaded from its signed URL, checked against the listing's sha256, bytes and rows,
and each line compared with the detail read of the same id. Then: a price sync that changes prices
rebuilds the cards and products files (not the others), one that changes nothing rebuilds nothing, and
two builders started at once leave one consistent set of files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import CARDCAT, REPO, Service, launch
from catalog_api.ingest.demo_catalog import write_demo_catalog
from tests.catalog_api.helpers import failed, ok
from tests.catalog_api.test_prices import NORMAL, card_row, prices_sync, product_row, write_feed

KINDS = ["cards", "products", "expansions", "series"]
DETAIL = {
    "cards": "/v1/cards/{}",
    "products": "/v1/products/{}",
    "expansions": "/v1/expansions/{}",
    "series": "/v1/series/{}",
}
LIST = {
    "cards": "/v1/cards",
    "products": "/v1/products",
    "expansions": "/v1/expansions",
    "series": "/v1/series",
}


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def bulk_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp(f"bulk-{request.param}")
    service = launch(request.param, tmp, write_demo_catalog(tmp / "catalog"))
    try:
        yield service
    finally:
        service.stop()


def local(service: Service, url: str) -> str:
    """The URL on this test's server (listings name the configured public base, not the test's port)."""
    assert url.startswith("http://127.0.0.1:8000/files/bulk/")  # CARDCAT_PUBLIC_URL's default
    return f"{service.base_url}/files/{url.split('/files/', 1)[1]}"


def listing(client: httpx.Client) -> dict[str, dict[str, Any]]:
    data = ok(client.get("/v1/bulk"))
    assert data["next_cursor"] is None
    assert [item["kind"] for item in data["items"]] == KINDS
    for item in data["items"]:
        assert set(item) == {"kind", "url", "sha256", "bytes", "rows", "generated_at"}
    return {item["kind"]: item for item in data["items"]}


def files_of(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A listing without its URLs' query (expiry, key and signature differ per key and per issue)."""
    return {kind: {**item, "url": item["url"].split("?")[0]} for kind, item in items.items()}


def download(service: Service, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The file, verified against its listing entry; its records."""
    response = httpx.get(local(service, item["url"]), timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    assert hashlib.sha256(response.content).hexdigest() == item["sha256"]
    assert len(response.content) == item["bytes"]
    lines = gzip.decompress(response.content).splitlines()
    assert len(lines) == item["rows"]
    return [json.loads(line) for line in lines]


def test_each_file_verifies_and_holds_exactly_the_detail_reads(bulk_service: Service) -> None:
    service = bulk_service
    with service.client() as client:
        items = listing(client)
        for kind in KINDS:
            records = download(service, items[kind])
            ids = [str(record["id"]) for record in records]
            # Every record of the kind, each once (the list endpoint walked to its end says which).
            listed, cursor = [], None
            while True:
                page = ok(
                    client.get(LIST[kind], params={"limit": 200, **({"cursor": cursor} if cursor else {})})
                )
                listed += [str(row["id"]) for row in page["items"]]
                if (cursor := page["next_cursor"]) is None:
                    break
            assert sorted(ids) == sorted(listed) and len(set(ids)) == len(ids)
            assert items[kind]["rows"] == len(listed) > 0
            for record in records:
                assert record == ok(client.get(DETAIL[kind].format(record["id"]))), (kind, record["id"])


def test_file_urls_need_their_signature(bulk_service: Service) -> None:
    service = bulk_service
    with service.client() as client:
        url = local(service, listing(client)["series"]["url"])
    base, query = url.split("?")
    for bad in (base, url.replace("signature=", "signature=0"), base + "?expires=1&signature=" + "0" * 64):
        assert httpx.get(bad, timeout=10).status_code == 401
    # A valid signature for one name opens no other file.
    other = base.replace("series-", "cards-") + "?" + query
    assert httpx.get(other, timeout=10).status_code == 401
    escape = base.rsplit("/", 1)[0] + "/..%2F..%2Fcardcat.db?" + query
    assert httpx.get(escape, timeout=10).status_code in (401, 404)


def test_the_listing_counts_against_the_rate_limit_and_carries_an_etag(bulk_service: Service) -> None:
    service = bulk_service
    failed(httpx.get(f"{service.base_url}/v1/bulk", timeout=10), 401, "unauthorized")
    with service.client() as client:
        first = client.get("/v1/bulk")
        again = client.get("/v1/bulk", headers={"If-None-Match": first.headers["ETag"]})
    assert "RateLimit" in first.headers and again.status_code == 304


def test_rebuilt_after_a_sync_that_changed_something_and_only_then(
    bulk_service: Service, tmp_path: Path
) -> None:
    service = bulk_service
    with service.client() as client:
        before = listing(client)
    feed = write_feed(
        tmp_path / "feed",
        [
            card_row("emb1-1", NORMAL, "2026-09-01", 4321, low=4000, high=5000, listing_count=3),
            product_row(900001, "2026-09-01", 7777),
        ],
    )
    report = prices_sync(service, feed)
    assert report["bulk"]["built"] is True and sorted(report["bulk"]["changed"]) == ["cards", "products"]
    with service.client() as client:
        after = listing(client)
        for kind in ("cards", "products"):
            assert after[kind]["sha256"] != before[kind]["sha256"]
            assert after[kind]["generated_at"] >= before[kind]["generated_at"]
        for kind in ("expansions", "series"):
            assert after[kind] == {**before[kind], "url": after[kind]["url"]}
        cards = {record["id"]: record for record in download(service, after["cards"])}
        assert cards["emb1-1"] == ok(client.get("/v1/cards/emb1-1"))
        assert cards["emb1-1"]["variants"][0]["marketplace"][0]["market"] == 4321
        products = {record["id"]: record for record in download(service, after["products"])}
        assert products[900001] == ok(client.get("/v1/products/900001"))
        assert products[900001]["marketplace"][0]["market"] == 7777
    # The same feed again, and the same catalog again: nothing changed, nothing is rebuilt.
    again = prices_sync(service, feed)
    assert again["log_rows_written"] == 0 and again["bulk"]["built"] is False
    catalog = json.loads(
        service.cli(
            "catalog", "sync", "--from", str(service.data_dir.parent / "catalog"), "--quiet"
        ).stdout.splitlines()[-1]
    )
    assert catalog["bulk"]["built"] is False
    with service.client() as client:  # another key: the same files, under URLs of its own
        assert files_of(listing(client)) == files_of(after)
    # The previous build's files stay downloadable (a download may have started from that listing).
    assert httpx.get(local(service, before["cards"]["url"]), timeout=10).status_code == 200


def test_two_builders_at_once_leave_one_consistent_set(bulk_service: Service) -> None:
    service = bulk_service
    builders = [
        subprocess.Popen(
            [*CARDCAT, "bulk", "build", "--force"],
            env=service.env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    summaries = [json.loads(proc.communicate(timeout=120)[0].splitlines()[-1]) for proc in builders]
    assert all(proc.returncode == 0 for proc in builders)
    assert all(summary["built"] for summary in summaries)
    # Forced, but the bytes are the same: names and generated_at stay.
    assert all(summary["changed"] == [] for summary in summaries)
    with service.client() as client:
        items = listing(client)
    for kind in KINDS:
        assert download(service, items[kind])
    leftovers = [p.name for p in (service.data_dir / "bulk").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
