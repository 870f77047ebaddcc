"""`CardcatClient` and `AsyncCardcatClient` against the real server (both database backends): every row
over cursor pages, detail and reference reads, movers, health, errors, ETag reuse."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import Service, launch
from cardcat_client import AsyncCardcatClient, CardcatClient, CardcatError, models
from tests.catalog_api.helpers import eventually, ok, walk


def same(model: models.Model, raw: dict[str, Any]) -> None:
    """The model holds exactly what the server sent (dates and numbers compare by value)."""
    assert model.model_dump(mode="json", exclude_unset=True) == raw


class Wire:
    """Counts the statuses a client saw on the wire (an httpx event hook)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    def __call__(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)


@pytest.fixture
def raw(service: Service) -> Iterator[httpx.Client]:
    with service.client() as client:
        yield client


@pytest.fixture
def cat(service: Service) -> Iterator[CardcatClient]:
    with CardcatClient(service.base_url, api_key=service.quick_key()) as client:
        yield client


def test_cards_walks_every_row_over_cursor_pages(service: Service, raw: httpx.Client) -> None:
    expected = walk(raw, "/v1/cards", limit=200)
    with CardcatClient(service.base_url, api_key=service.quick_key()) as cat:
        rows = list(cat.cards(limit=97))
        assert cat.stats.responses == math.ceil(len(expected) / 97)
    assert len(expected) > 200 and [r.id for r in rows] == [r["id"] for r in expected]
    assert len({r.id for r in rows}) == len(rows)
    for row, want in zip(rows, expected, strict=True):
        assert isinstance(row, models.CardSummary)
        same(row, want)


def test_cards_passes_search_and_includes(cat: CardcatClient, raw: httpx.Client) -> None:
    expansion = ok(raw.get("/v1/expansions", params={"limit": 1}))["items"][0]["id"]
    params = {"expansion_id": expansion, "include": "variants,metadata"}
    expected = walk(raw, "/v1/cards", **params, limit=200)
    rows = list(cat.cards(expansion_id=expansion, include=["variants", "metadata"], limit=7))
    assert rows and len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        same(row, want)
        assert row.variants is not None and row.score is None and row.change is None
    hits = list(cat.cards(q="charzard", limit=5))
    assert hits and all(hit.score is not None and 0 <= hit.score <= 1 for hit in hits)
    assert "char" in hits[0].name.lower()


def test_card_and_reference_reads(cat: CardcatClient, raw: httpx.Client) -> None:
    first = ok(raw.get("/v1/cards", params={"limit": 1}))["items"][0]
    card = cat.card(first["id"])
    assert isinstance(card, models.Card)
    same(card, ok(raw.get(f"/v1/cards/{first['id']}")))

    for method, path in ((cat.series, "/v1/series"), (cat.expansions, "/v1/expansions")):
        rows = list(method(limit=3))  # type: ignore[operator]
        expected = walk(raw, path, limit=200)
        assert rows and len(rows) == len(expected)
        for row, want in zip(rows, expected, strict=True):
            same(row, want)
    products = list(cat.products(limit=50))
    expected_products = walk(raw, "/v1/products", limit=200)
    assert [p.id for p in products] == [p["id"] for p in expected_products]
    for product, want in zip(products, expected_products, strict=True):
        same(product, want)

    series = next(cat.series())
    same(cat.series_by_id(series.id), ok(raw.get(f"/v1/series/{series.id}")))
    expansion = next(cat.expansions(series_id=series.id))
    assert expansion.series_id == series.id
    same(cat.expansion(expansion.id), ok(raw.get(f"/v1/expansions/{expansion.id}")))
    if products:
        same(cat.product(products[0].id), ok(raw.get(f"/v1/products/{products[0].id}")))


def test_health(cat: CardcatClient, raw: httpx.Client) -> None:
    health = cat.health()
    served = ok(raw.get("/health"))
    assert health.status == served["status"] and set(health.feeds) == set(served["feeds"])
    assert health.feeds["catalog"].synced_at is not None and health.last_updated is not None


def test_errors_carry_status_code_and_message(service: Service, cat: CardcatClient) -> None:
    with pytest.raises(CardcatError) as missing:
        cat.card("no-such-card")
    assert (missing.value.status, missing.value.code) == (404, "not_found") and missing.value.message
    with pytest.raises(CardcatError) as bad:
        next(cat.movers(window="5d"))
    assert (bad.value.status, bad.value.code) == (400, "bad_request")
    with (
        CardcatClient(service.base_url, api_key="cc_not_a_key") as stranger,
        pytest.raises(CardcatError) as denied,
    ):
        stranger.health()  # no key needed here
        next(stranger.series())
    assert (denied.value.status, denied.value.code) == (401, "unauthorized")
    assert cat.stats.retries == 0, "4xx answers (but 429) are final"


def test_etag_reuse_answers_from_the_kept_body_on_304(service: Service) -> None:
    wire = Wire()
    http = httpx.Client(event_hooks={"response": [wire]}, timeout=30)
    with http, CardcatClient(service.base_url, api_key=service.quick_key(), http_client=http) as cat:
        first_page = cat.cards_page(limit=5)
        first_card = cat.card(first_page.items[0].id)
        again_page = cat.cards_page(limit=5)
        again_card = cat.card(first_page.items[0].id)
        rows = list(cat.cards(limit=5, expansion_id=first_page.items[0].expansion_id))
        rows_again = list(cat.cards(limit=5, expansion_id=first_page.items[0].expansion_id))
        pages = math.ceil(len(rows) / 5)
        assert wire.statuses == [200, 200, 304, 304] + [200] * pages + [304] * pages
        assert cat.stats.not_modified == 2 + pages
    assert again_page == first_page and again_card == first_card and rows_again == rows


def test_an_etag_cache_of_zero_never_sends_if_none_match(service: Service) -> None:
    wire = Wire()
    http = httpx.Client(event_hooks={"response": [wire]}, timeout=30)
    with (
        http,
        CardcatClient(
            service.base_url, api_key=service.quick_key(), http_client=http, etag_cache_size=0
        ) as cat,
    ):
        cat.health()
        cat.health()
    assert wire.statuses == [200, 200]


def test_the_async_client_reads_the_same(service: Service, raw: httpx.Client) -> None:
    expected = [row["id"] for row in walk(raw, "/v1/cards", limit=200)]
    first = expected[0]

    async def run() -> tuple[list[str], models.Card, models.Health, int, CardcatError]:
        async with AsyncCardcatClient(service.base_url, api_key=service.quick_key()) as cat:
            ids = [row.id async for row in cat.cards(limit=150)]
            card, health = await asyncio.gather(cat.card(first), cat.health())
            await cat.card(first)
            try:
                await cat.card("no-such-card")
            except CardcatError as error:
                return ids, card, health, cat.stats.not_modified, error
        raise AssertionError("a missing card must raise")

    ids, card, health, not_modified, error = asyncio.run(run())
    assert ids == expected and card.id == first and health.status in ("ok", "degraded")
    assert not_modified == 1
    assert (error.status, error.code) == (404, "not_found")


# --- prices: the sample catalog with a 31-day demo price feed ------------------------------------------


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def priced(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    from catalog_api.ingest.demo_catalog import write_demo_catalog
    from catalog_api.prices.demo_prices import write_demo_prices

    tmp: Path = tmp_path_factory.mktemp(f"priced-{request.param}")
    catalog = write_demo_catalog(tmp / "catalog")
    service = launch(request.param, tmp, catalog)
    try:
        service.cli("prices", "sync", "--from", str(write_demo_prices(catalog, tmp / "prices")), "--quiet")
        yield service
    finally:
        service.stop()


def test_movers_and_prices(priced: Service) -> None:
    with priced.client() as raw, CardcatClient(priced.base_url, api_key=priced.quick_key()) as cat:

        def served(**params: Any) -> list[dict[str, Any]]:
            return walk(raw, "/v1/movers", limit=200, **params)

        for window, direction in (("7d", "gainers"), ("30d", "losers")):
            expected = served(window=window, direction=direction)
            rows = list(cat.movers(window=window, direction=direction, limit=4))
            assert len(expected) > 4 and [r.id for r in rows] == [r["id"] for r in expected]
            for row, want in zip(rows, expected, strict=True):
                same(row, want)
                assert row.change and any(entry.window == window for entry in row.change)
        filtered = list(cat.movers(window="30d", min_cents=500))
        assert [r.id for r in filtered] == [r["id"] for r in served(window="30d", min_cents=500)]
        moved = rows[0]
        card = cat.card(moved.id)
        prices = [price for variant in card.variants for price in variant.marketplace]
        assert prices and all(price.currency == "USD" and price.observed_on for price in prices)

        def priced_product() -> models.Product:
            product = next(cat.products())
            assert product.marketplace and product.marketplace[0].variant
            return product

        # Products come from the worker's read model, which picks up the fixture's price sync within
        # about a second of it (it re-reads the feed versions at most once a second): a fast run can
        # get here first and read the products as they were before the sync.
        eventually(priced_product)
        assert cat.health().feeds["marketplace"].observed_on is not None
