"""`GET /v1/cards` beyond a plain page: many ids, filters, sorts and their cursor walks, checked against
the feed files themselves (tests/catalog_api/feed_truth.py reads them; nothing here asks our code what
the answer should be), on PostgreSQL and SQLite through the real server.

The catalog is the subset of the real feed (or, without ../shared, the project's sample catalog); the
prices are written by `../shared/tools/marketfeed.py` (or the demo price feed) and loaded with the real
`cardcat prices sync`, so the headline prices include null markets where the real generator makes them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import SHARED, Service, launch
from catalog_api.catalog.schemas import CardSummary
from tests.catalog_api.feed_truth import FeedCard, FeedTruth
from tests.catalog_api.helpers import failed, ok, walk

MARKETFEED = SHARED / "tools" / "marketfeed.py"
DAYS = ("--start", "2026-08-01", "--days", "3")


def write_prices(catalog: Path, out: Path) -> Path:
    """Three days of the price feed for this catalog, in the upstream format."""
    if MARKETFEED.exists():
        subprocess.run(
            [sys.executable, str(MARKETFEED), "--catalog", str(catalog), "--out", str(out), *DAYS],
            check=True,
            capture_output=True,
        )
        return out
    from catalog_api.prices.demo_prices import write_demo_prices

    return write_demo_prices(catalog, out, days=3, end=date(2026, 8, 3))


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory, feed_dir: Path) -> tuple[Path, FeedTruth]:
    prices = write_prices(feed_dir, tmp_path_factory.mktemp("prices"))
    return prices, FeedTruth(feed_dir, prices)


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def served(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    feed_dir: Path,
    priced: tuple[Path, FeedTruth],
) -> Iterator[tuple[Service, FeedTruth]]:
    svc = launch(request.param, tmp_path_factory.mktemp(f"queries-{request.param}"), feed_dir)
    svc.cli("prices", "sync", "--from", str(priced[0]), "--quiet")
    yield svc, priced[1]
    svc.stop()


@pytest.fixture
def client(served: tuple[Service, FeedTruth]) -> Iterator[httpx.Client]:
    with served[0].client() as c:
        yield c


@pytest.fixture
def truth(served: tuple[Service, FeedTruth]) -> FeedTruth:
    return served[1]


def ids_of(rows: list[dict[str, Any]]) -> list[str]:
    return [row["id"] for row in rows]


def walked(client: httpx.Client, limit: int = 200, **params: Any) -> list[str]:
    """Every row of a cursor walk, asserting no row comes twice."""
    rows = ids_of(walk(client, "/v1/cards", limit=limit, **params))
    assert len(rows) == len(set(rows)), "a walk served a row twice"
    return rows


# --- many ids ------------------------------------------------------------------------------------------


def test_ids_in_the_order_given_each_once_unknown_left_out(client: httpx.Client, truth: FeedTruth) -> None:
    known = sorted(truth.cards)[:7]
    asked = [known[3], "no-such-card", known[0], known[3], known[6], " ", known[1]]
    data = ok(client.get("/v1/cards", params={"ids": ",".join(asked)}))
    assert ids_of(data["items"]) == [known[3], known[0], known[6], known[1]]
    assert data["next_cursor"] is None
    for row in data["items"]:
        CardSummary.model_validate(row)
        assert "variants" not in row and "score" not in row
        assert row["name"] == truth.cards[row["id"]].name


def test_ids_compose_with_include_and_ignore_limit(client: httpx.Client, truth: FeedTruth) -> None:
    asked = list(reversed(sorted(truth.cards)))[:60]
    data = ok(client.get("/v1/cards", params={"ids": ",".join(asked), "include": "variants,metadata,names"}))
    assert ids_of(data["items"]) == asked  # every row it names, one page (limit does not apply)
    data_limited = ok(client.get("/v1/cards", params={"ids": ",".join(asked), "limit": 5}))
    assert ids_of(data_limited["items"]) == asked
    for row in data["items"][:10]:
        detail = ok(client.get(f"/v1/cards/{row['id']}"))
        assert row["variants"] == detail["variants"] and row["metadata"] == detail["metadata"]
        assert row["names"] == truth.cards[row["id"]].names


def test_ids_limits_and_conflicts(client: httpx.Client, truth: FeedTruth) -> None:
    all_ids = sorted(truth.cards)
    assert len(all_ids) >= 201, "the test catalog must have over 200 cards"
    full = ok(client.get("/v1/cards", params={"ids": ",".join(all_ids[:200])}))
    assert ids_of(full["items"]) == all_ids[:200]
    # 200 distinct ids, some twice: still 200 ids.
    doubled = ok(client.get("/v1/cards", params={"ids": ",".join(all_ids[:200] + all_ids[:10])}))
    assert len(doubled["items"]) == 200
    failed(client.get("/v1/cards", params={"ids": ",".join(all_ids[:201])}), 400, "bad_request")
    failed(client.get("/v1/cards", params={"ids": ",,"}), 400, "bad_request")
    for extra in ({"q": "char"}, {"sort": "name"}, {"expansion_id": "base1"}, {"rarity": "rare"}):
        failed(client.get("/v1/cards", params={"ids": all_ids[0], **extra}), 400, "bad_request")


# --- filters -------------------------------------------------------------------------------------------


def _pick(values: list[Any]) -> Any:
    """The most common value (a filter that keeps a good share of cards)."""
    return max(sorted(set(values), key=str), key=values.count)


def _filters(truth: FeedTruth) -> list[tuple[dict[str, Any], Any]]:
    """(query, the feed's predicate) pairs, values drawn from the feed and sent in another case."""
    cards = list(truth.cards.values())
    rarity = _pick([c.rarity for c in cards if c.rarity])
    illustrator = _pick([c.illustrator for c in cards if c.illustrator])
    type_ = _pick([t for c in cards for t in c.types])
    category = _pick([c.category for c in cards if c.category])
    expansion = _pick([c.expansion_id for c in cards])
    prices = sorted(c.price for c in cards if c.price is not None)
    low, high = prices[len(prices) // 4], prices[3 * len(prices) // 4]
    return [
        ({"rarity": rarity.upper()}, lambda c: c.rarity == rarity),
        ({"rarity": "None"}, lambda c: False),  # the feed's "None" rarity is served null
        ({"category": category.lower()}, lambda c: c.category == category),
        ({"illustrator": illustrator.swapcase()}, lambda c: c.illustrator == illustrator),
        ({"type": type_.lower()}, lambda c: type_ in c.types),
        ({"hp_min": 100}, lambda c: c.hp is not None and c.hp >= 100),
        ({"hp_max": 60}, lambda c: c.hp is not None and c.hp <= 60),
        ({"hp_min": 70, "hp_max": 70}, lambda c: c.hp == 70),
        ({"legal": "standard"}, lambda c: c.standard),
        ({"legal": "expanded"}, lambda c: c.expanded),
        ({"price_min": low}, lambda c: c.price is not None and c.price >= low),
        ({"price_max": high}, lambda c: c.price is not None and c.price <= high),
        (
            {"price_min": low, "price_max": high, "category": category, "expansion_id": expansion},
            lambda c: (
                c.price is not None
                and low <= c.price <= high
                and c.category == category
                and c.expansion_id == expansion
            ),
        ),
        (
            {"type": type_, "hp_min": 60, "legal": "expanded"},
            lambda c: type_ in c.types and c.hp is not None and c.hp >= 60 and c.expanded,
        ),
        ({"illustrator": "nobody draws this"}, lambda c: False),
    ]


def test_each_filter_matches_the_feed(client: httpx.Client, truth: FeedTruth) -> None:
    for query, keep in _filters(truth):
        expected = truth.ids(keep)
        assert walked(client, **query) == expected, query
        if not expected:
            page = ok(client.get("/v1/cards", params=query))
            assert page == {"items": [], "next_cursor": None}


def test_filters_compose_with_search(client: httpx.Client, truth: FeedTruth) -> None:
    plain = ids_of(walk(client, "/v1/cards", q="char", limit=200))
    kept = set(truth.ids(lambda c: c.category == "Pokemon" and c.hp is not None and c.hp >= 100))
    rows = walk(client, "/v1/cards", q="char", category="pokemon", hp_min=100, limit=7)
    assert ids_of(rows) == [card_id for card_id in plain if card_id in kept]
    assert all("score" in row for row in rows)


# --- sorts and cursor walks ----------------------------------------------------------------------------

SORTS = ["catalog", "name", "-name", "release", "-release", "price", "-price"]


@pytest.mark.parametrize("sort", SORTS)
def test_each_sort_walks_the_whole_feed_without_duplicates_or_gaps(
    client: httpx.Client, truth: FeedTruth, sort: str
) -> None:
    rows = walked(client, limit=97, sort=sort)
    assert rows == truth.ids(None, sort)
    assert set(rows) == set(truth.cards)


@pytest.mark.parametrize("sort", ["-price", "name", "release", "catalog"])
def test_filtered_sorted_walks(client: httpx.Client, truth: FeedTruth, sort: str) -> None:
    def keep(card: FeedCard) -> bool:
        return card.category == "Pokemon" and card.hp is not None and card.hp >= 60

    assert walked(client, limit=41, sort=sort, category="POKEMON", hp_min=60) == truth.ids(keep, sort)


def test_price_orders_put_unpriced_cards_last(client: httpx.Client, truth: FeedTruth) -> None:
    unpriced = {card_id for card_id, card in truth.cards.items() if card.price is None}
    assert unpriced, "the test catalog must hold cards without a price"
    for sort in ("price", "-price"):
        rows = walked(client, limit=200, sort=sort)
        assert set(rows[-len(unpriced) :]) == unpriced
        assert rows[-len(unpriced) :] == sorted(unpriced)  # ties by id


def test_a_cursor_is_only_good_for_its_own_sort_and_filter(client: httpx.Client) -> None:
    first = ok(client.get("/v1/cards", params={"sort": "name", "limit": 5}))
    again = ok(client.get("/v1/cards", params={"sort": "-name", "limit": 5, "cursor": first["next_cursor"]}))
    fresh = ok(client.get("/v1/cards", params={"sort": "-name", "limit": 5}))
    assert again["items"] == fresh["items"]  # a cursor issued for another query is ignored: first page


def test_bad_filter_and_sort_values(client: httpx.Client) -> None:
    for query in (
        {"sort": "popularity"},
        {"sort": "name", "q": "char"},
        {"sort": "-price", "q": "char"},
        {"legal": "unlimited"},
        {"hp_min": "ten"},
        {"hp_max": "1.5"},
        {"hp_min": 200, "hp_max": 100},
        {"price_min": -1},
        {"price_min": 500, "price_max": 100},
        {"price_max": "cheap"},
        {"lang": "jp"},
        {"lang": "EN"},
    ):
        failed(client.get("/v1/cards", params=query), 400, "bad_request")
    assert ok(client.get("/v1/cards", params={"q": "char", "sort": "catalog", "limit": 1}))["items"]


def test_new_parameters_are_part_of_the_etag(client: httpx.Client) -> None:
    by_name = client.get("/v1/cards", params={"sort": "name", "limit": 3})
    by_price = client.get("/v1/cards", params={"sort": "-price", "limit": 3})
    assert by_name.json()["data"]["items"] != by_price.json()["data"]["items"]
    assert by_name.headers["ETag"] != by_price.headers["ETag"]
    again = client.get(
        "/v1/cards", params={"sort": "name", "limit": 3}, headers={"If-None-Match": by_name.headers["ETag"]}
    )
    assert again.status_code == 304


def test_movers_in_a_language(client: httpx.Client, truth: FeedTruth) -> None:
    rows = walk(client, "/v1/movers", window="1d", lang="de", limit=200)
    assert rows, "three days of prices must make some 1d movers"
    for row in rows:
        card = truth.cards[row["id"]]
        assert row["name"] == (card.names.get("de") or card.name)
    assert any(row["name"] != truth.cards[row["id"]].name for row in rows)
