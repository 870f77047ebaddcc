"""`GET /v1/cards/{id}/prices` and `GET /v1/products/{id}/prices` against the feed files themselves.

The sample catalog (`catalog_api/ingest/demo_catalog.py`) on PostgreSQL and SQLite; three price feeds
written here in the upstream format and loaded by the real `cardcat prices sync`, with a catalog sync
between the first two that reclassifies a printing, and a late day loaded last. Every expected point is
computed from the daily files on disk (not from the database): for each calendar day, the last feed
row on or before it that names the printing and condition.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cardcat.stack import Service, launch
from catalog_api.ingest.demo_catalog import write_demo_catalog
from catalog_api.prices.schemas import CardPriceHistory, ProductPriceHistory
from tests.catalog_api.helpers import failed, ok
from tests.catalog_api.test_prices import (
    FIRST_ED,
    HOLO,
    HOLO_COSMOS,
    NORMAL,
    card_row,
    prices_sync,
    product_row,
    reclassify_holo,
    write_feed,
)

NEWEST = "2026-09-20"
PRINTING_KEYS = ("type", "subtype", "size", "stamps", "foil")

FEED_ONE = [
    card_row("emb1-1", NORMAL, "2026-08-01", 1000, low=900, high=1300, listing_count=12),
    card_row("emb1-1", NORMAL, "2026-08-10", 1100, low=1000, high=1400, listing_count=9),
    # A market that went null (low and high still quoted): shown null until the next row.
    card_row("emb1-1", NORMAL, "2026-08-20", None, low=950, high=None, listing_count=1),
    card_row("emb1-1", NORMAL, "2026-09-01", 1200, low=1100, high=1500, listing_count=25),
    card_row("emb1-1", NORMAL, "2026-08-01", 800, condition="LP"),
    card_row("emb1-1", NORMAL, "2026-08-15", 700, condition="LP"),
    card_row("emb1-1", FIRST_ED, "2026-08-05", 5000),
    # emb1-3: only its second printing has an NM price, so that one is the headline.
    card_row("emb1-3", FIRST_ED, "2026-08-03", 3000),
    # emb1-5: the plain holo printing the catalog then reclassifies.
    card_row("emb1-5", HOLO, "2026-08-01", 700),
    card_row("emb1-5", HOLO, "2026-08-20", 750),
    product_row(900001, "2026-08-01", 4999),
    product_row(900001, "2026-08-25", 5200),
]
FEED_TWO = [
    card_row("emb1-1", NORMAL, "2026-09-10", 1300),
    card_row("emb1-1", NORMAL, NEWEST, 1250),
    card_row("emb1-5", HOLO_COSMOS, "2026-09-05", 900),
    card_row("emb1-5", HOLO_COSMOS, "2026-09-15", 990),
    card_row("emb1-5", HOLO, "2026-09-15", 1),  # the old printing no longer exists: unmatched
    product_row(900001, NEWEST, 5499),
]
# A day that arrives after newer ones.
LATE = [card_row("emb1-1", NORMAL, "2026-09-07", 1280)]


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def history(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, list[Path], dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp(f"history-{request.param}")
    catalog = write_demo_catalog(tmp / "catalog")
    service = launch(request.param, tmp, catalog)
    try:
        with service.client() as client:
            before = ok(client.get("/v1/cards/emb1-5"))
        feeds = [write_feed(tmp / "feed1", FEED_ONE)]
        prices_sync(service, feeds[0])
        reclassify_holo(catalog)
        service.cli("catalog", "sync", "--from", str(catalog), "--quiet")
        feeds.append(write_feed(tmp / "feed2", FEED_TWO))
        prices_sync(service, feeds[1])
        feeds.append(write_feed(tmp / "late", LATE))
        late = prices_sync(service, feeds[2])
        assert late["log_rows_written"] == 1 and late["current_rows_written"] == 0
        yield service, feeds, before
    finally:
        service.stop()


# --- the expectation, from the files ----------------------------------------------------------------


def feed_rows(feeds: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for folder in feeds:
        for path in sorted((folder / "marketplace").glob("*.ndjson.gz")):
            with gzip.open(path, "rb") as handle:
                rows.extend(orjson.loads(line) for line in handle if line.strip())
    return rows


def expected_points(rows: list[dict[str, Any]], start: str, end: str) -> list[dict[str, Any]]:
    """The contract, computed the slow way: every day from max(start, first row) to end, the last row
    on or before it."""
    rows = sorted(rows, key=lambda r: r["observed_on"])
    if not rows:
        return []
    day, last = (
        max(date.fromisoformat(start), date.fromisoformat(rows[0]["observed_on"])),
        date.fromisoformat(end),
    )
    out = []
    while day <= last:
        held = [r for r in rows if r["observed_on"] <= day.isoformat()]
        row = held[-1]
        out.append(
            {
                "date": day.isoformat(),
                **{k: row[k] for k in ("market", "low", "high", "listing_count")},
                "observed_on": row["observed_on"],
            }
        )
        day += timedelta(days=1)
    return out


def card_feed_rows(feeds: list[Path], card_id: str, printing: dict[str, Any], condition: str) -> list[Any]:
    wanted = {k: printing[k] for k in PRINTING_KEYS}
    return [
        r
        for r in feed_rows(feeds)
        if r["subject"] == "card"
        and r["card_id"] == card_id
        and r["condition"] == condition
        and {k: r["printing"][k] for k in PRINTING_KEYS} == wanted
    ]


def product_feed_rows(feeds: list[Path], product_id: int, variant: str, condition: str) -> list[Any]:
    return [
        r
        for r in feed_rows(feeds)
        if r["subject"] == "product"
        and r["product_id"] == product_id
        and r["variant"] == variant
        and r["condition"] == condition
    ]


def printing_of(client: httpx.Client, card_id: str, printing: dict[str, Any]) -> dict[str, Any]:
    variants = ok(client.get(f"/v1/cards/{card_id}"))["variants"]
    found = [v for v in variants if all(v[k] == printing[k] for k in PRINTING_KEYS)]
    assert len(found) == 1, (printing, variants)
    return found[0]


def card_history(client: httpx.Client, card_id: str, **params: Any) -> dict[str, Any]:
    data = ok(client.get(f"/v1/cards/{card_id}/prices", params=params))
    CardPriceHistory.model_validate(data)
    return data  # type: ignore[no-any-return]


# --- cards ------------------------------------------------------------------------------------------


def test_default_history_is_the_headline_nm_over_90_days_to_the_newest_day(history: Any) -> None:
    service, feeds, _ = history
    with service.client() as client:
        normal = printing_of(client, "emb1-1", NORMAL)
        data = card_history(client, "emb1-1")
    assert (data["card_id"], data["variant_id"], data["condition"], data["currency"]) == (
        "emb1-1",
        normal["id"],
        "NM",
        "USD",
    )
    start = (date.fromisoformat(NEWEST) - timedelta(days=89)).isoformat()
    expected = expected_points(card_feed_rows(feeds, "emb1-1", NORMAL, "NM"), start, NEWEST)
    assert data["points"] == expected
    # The window starts at the first observation (08-01), not 90 days back, and ends at the newest day.
    assert data["points"][0]["date"] == "2026-08-01" and data["points"][-1]["date"] == NEWEST
    assert len(data["points"]) == 51
    by_day = {p["date"]: p for p in data["points"]}
    # Carried forward: no row on 08-15, so it shows the 08-10 row.
    assert (by_day["2026-08-15"]["market"], by_day["2026-08-15"]["observed_on"]) == (1100, "2026-08-10")
    # A null market is served null (with the row's other fields) until the next row.
    assert by_day["2026-08-25"] == {
        "date": "2026-08-25",
        "market": None,
        "low": 950,
        "high": None,
        "listing_count": 1,
        "observed_on": "2026-08-20",
    }
    # The late day, loaded after 09-10 and 09-20, sits in its place.
    assert (by_day["2026-09-07"]["market"], by_day["2026-09-08"]["observed_on"]) == (1280, "2026-09-07")
    assert (by_day["2026-09-09"]["market"], by_day["2026-09-10"]["market"]) == (1280, 1300)


def test_an_explicit_window_carries_the_row_before_it_and_runs_past_the_newest_day(history: Any) -> None:
    service, feeds, _ = history
    rows = card_feed_rows(feeds, "emb1-1", NORMAL, "NM")
    with service.client() as client:
        inside = card_history(client, "emb1-1", **{"from": "2026-08-12", "to": "2026-08-22"})
        past = card_history(client, "emb1-1", **{"from": "2026-09-18", "to": "2026-09-24"})
        one = card_history(client, "emb1-1", **{"from": "2026-09-07", "to": "2026-09-07"})
    assert inside["points"] == expected_points(rows, "2026-08-12", "2026-08-22")
    assert len(inside["points"]) == 11 and inside["points"][0]["observed_on"] == "2026-08-10"
    assert past["points"] == expected_points(rows, "2026-09-18", "2026-09-24")
    assert [p["observed_on"] for p in past["points"][2:]] == [NEWEST] * 5
    assert one["points"] == expected_points(rows, "2026-09-07", "2026-09-07")
    with service.client() as client:
        before_any = card_history(client, "emb1-1", **{"from": "2026-07-01", "to": "2026-07-31"})
    assert before_any["points"] == []


def test_other_conditions_and_printings(history: Any) -> None:
    service, feeds, _ = history
    with service.client() as client:
        first_ed = printing_of(client, "emb1-1", FIRST_ED)
        lp = card_history(client, "emb1-1", condition="LP")
        lower = card_history(client, "emb1-1", condition="lp")
        second = card_history(client, "emb1-1", variant_id=str(first_ed["id"]))
        nothing = card_history(client, "emb1-1", variant_id=str(first_ed["id"]), condition="DMG")
    start = (date.fromisoformat(NEWEST) - timedelta(days=89)).isoformat()
    assert lp["condition"] == "LP" and lp["points"]
    assert lp["points"] == expected_points(card_feed_rows(feeds, "emb1-1", NORMAL, "LP"), start, NEWEST)
    assert lower == lp
    assert second["variant_id"] == first_ed["id"]
    assert second["points"] == expected_points(card_feed_rows(feeds, "emb1-1", FIRST_ED, "NM"), start, NEWEST)
    assert nothing["points"] == []


def test_default_printing_is_the_headline_else_the_first(history: Any) -> None:
    service, feeds, _ = history
    with service.client() as client:
        headline = printing_of(client, "emb1-3", FIRST_ED)
        data = card_history(client, "emb1-3")
        first = ok(client.get("/v1/cards/emb1-2"))["variants"][0]
        unpriced = card_history(client, "emb1-2")
    assert data["variant_id"] == headline["id"]
    start = (date.fromisoformat(NEWEST) - timedelta(days=89)).isoformat()
    assert data["points"] == expected_points(card_feed_rows(feeds, "emb1-3", FIRST_ED, "NM"), start, NEWEST)
    assert (unpriced["variant_id"], unpriced["points"]) == (first["id"], [])


def test_a_reclassified_printing_has_only_its_new_history(history: Any) -> None:
    service, feeds, before = history
    old_id = next(v["id"] for v in before["variants"] if v["type"] == "holo" and not v["stamps"])
    with service.client() as client:
        cosmos = printing_of(client, "emb1-5", HOLO_COSMOS)
        data = card_history(client, "emb1-5", **{"from": "2026-08-01"})
        gone = client.get("/v1/cards/emb1-5/prices", params={"variant_id": str(old_id)})
    assert cosmos["id"] != old_id
    assert data["variant_id"] == cosmos["id"]
    expected = expected_points(card_feed_rows(feeds, "emb1-5", HOLO_COSMOS, "NM"), "2026-08-01", NEWEST)
    assert data["points"] == expected
    assert data["points"][0] == {
        "date": "2026-09-05",
        "market": 900,
        "low": None,
        "high": None,
        "listing_count": None,
        "observed_on": "2026-09-05",
    }
    # The old printing's id is gone with it (its rows, and the unmatched one of feed two, are not served).
    failed(gone, 404, "not_found")
    assert all(p["observed_on"] >= "2026-09-05" for p in data["points"])
    assert card_feed_rows(feeds, "emb1-5", HOLO, "NM")  # the old printing did have rows, since 08-01


def test_unknown_ids_are_not_found(history: Any) -> None:
    service, _, _ = history
    with service.client() as client:
        other = ok(client.get("/v1/cards/emb1-3"))["variants"][0]["id"]
        failed(client.get("/v1/cards/nope-1/prices"), 404, "not_found")
        failed(client.get("/v1/cards/emb1-1/prices", params={"variant_id": str(other)}), 404, "not_found")
        failed(client.get("/v1/cards/emb1-1/prices", params={"variant_id": "999999"}), 404, "not_found")


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-13-01"},
        {"from": "20260801"},
        {"to": "2026-02-30"},
        {"to": "yesterday"},
        {"from": "2026-09-02", "to": "2026-09-01"},
        {"from": "2025-09-18", "to": NEWEST},  # 367 days
        {"from": "2026-01-01"},  # with the default `to` (the newest day): 262 days is fine, see below
        {"variant_id": "abc"},
        {"condition": "N M"},
    ],
)
def test_bad_parameters_are_bad_requests(history: Any, params: dict[str, str]) -> None:
    service, _, _ = history
    with service.client() as client:
        response = client.get("/v1/cards/emb1-1/prices", params=params)
        product = client.get("/v1/products/900001/prices", params=params)
    if params == {"from": "2026-01-01"}:
        assert response.status_code == product.status_code == 200
        return
    failed(response, 400, "bad_request")
    if "variant_id" not in params:
        failed(product, 400, "bad_request")


def test_a_span_of_exactly_366_days_is_allowed(history: Any) -> None:
    service, _, _ = history
    with service.client() as client:
        data = card_history(client, "emb1-1", **{"from": "2025-09-19", "to": NEWEST})
    assert data["points"][0]["date"] == "2026-08-01" and len(data["points"]) == 51


def test_history_reads_carry_etags(history: Any) -> None:
    service, _, _ = history
    with service.client() as client:
        first = client.get("/v1/cards/emb1-1/prices")
        again = client.get("/v1/cards/emb1-1/prices", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and "RateLimit" in first.headers


# --- sealed products --------------------------------------------------------------------------------


def test_product_history_against_the_feed(history: Any) -> None:
    service, feeds, _ = history
    with service.client() as client:
        data = ok(client.get("/v1/products/900001/prices"))
        window = ok(
            client.get(
                "/v1/products/900001/prices",
                params={"variant": "Normal", "from": "2026-08-20", "to": "2026-08-30"},
            )
        )
        unpriced = ok(client.get("/v1/products/900002/prices"))
    ProductPriceHistory.model_validate(data)
    assert (data["product_id"], data["variant"], data["condition"], data["currency"]) == (
        900001,
        "Normal",
        "NM",
        "USD",
    )
    rows = product_feed_rows(feeds, 900001, "Normal", "NM")
    start = (date.fromisoformat(NEWEST) - timedelta(days=89)).isoformat()
    assert data["points"] == expected_points(rows, start, NEWEST)
    assert len(data["points"]) == 51 and data["points"][30]["observed_on"] == "2026-08-25"
    assert window["points"] == expected_points(rows, "2026-08-20", "2026-08-30")
    assert (unpriced["variant"], unpriced["points"]) == (None, [])


def test_product_unknown_ids_and_variants_are_not_found(history: Any) -> None:
    service, _, _ = history
    with service.client() as client:
        failed(client.get("/v1/products/123/prices"), 404, "not_found")
        failed(client.get("/v1/products/abc/prices"), 404, "not_found")
        failed(client.get("/v1/products/900001/prices", params={"variant": "Foil"}), 404, "not_found")
        failed(client.get("/v1/products/900002/prices", params={"variant": "Normal"}), 404, "not_found")
