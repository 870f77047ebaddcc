"""`cardcat prices sync` end to end, and what it feeds: current prices, movers, the leaderboard and the
daily price snapshot files.

The catalog is the project's own sample (`catalog_api/ingest/demo_catalog.py`), so these tests run without
../shared; the price feeds are written here, row by row, so every mover below is checked by hand.
One test also loads `../shared/tools/marketfeed.py` output (the real feed format) where it exists.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cardcat.stack import SHARED, Service, launch, require_shared
from catalog_api.catalog.readmodel import RECHECK_S
from catalog_api.ingest.demo_catalog import write_demo_catalog
from tests.catalog_api.helpers import failed, ok, walk

AS_OF = "2026-09-30"
NORMAL = {"type": "normal", "subtype": None, "size": None, "stamps": [], "foil": None}
FIRST_ED = {**NORMAL, "stamps": ["1st-edition"]}
HOLO = {**NORMAL, "type": "holo", "subtype": "unlimited"}
HOLO_COSMOS = {**HOLO, "foil": "cosmos"}


def card_row(
    card_id: str, printing: dict[str, Any], day: str, market: int | None, **extra: Any
) -> dict[str, Any]:
    quote = {"low": None, "high": None, "listing_count": None, **extra}
    return {
        "subject": "card",
        "card_id": card_id,
        "printing": printing,
        "condition": extra.pop("condition", "NM") if "condition" in extra else "NM",
        "currency": "USD",
        "market": market,
        **{k: quote[k] for k in ("low", "high", "listing_count")},
        "observed_on": day,
    }


def product_row(product_id: int, day: str, market: int) -> dict[str, Any]:
    return {
        "subject": "product",
        "product_id": product_id,
        "variant": "Normal",
        "condition": "NM",
        "currency": "USD",
        "market": market,
        "low": market - 100,
        "high": market + 500,
        "listing_count": 7,
        "observed_on": day,
    }


def write_feed(folder: Path, rows: list[dict[str, Any]]) -> Path:
    """Daily change-log files as marketfeed.py writes them: one gzip JSON Lines file per day."""
    days: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        days.setdefault(row["observed_on"], []).append(row)
    out = folder / "marketplace"
    out.mkdir(parents=True, exist_ok=True)
    for day, day_rows in days.items():
        with gzip.open(out / f"{day}.ndjson.gz", "wb") as handle:
            handle.writelines(orjson.dumps(row) + b"\n" for row in day_rows)
    return folder


def prices_sync(service: Service, folder: Path) -> dict[str, Any]:
    """Run the real CLI; its stdout is one JSON report. Waits out the read cache's documented re-check."""
    import time

    result = service.cli("prices", "sync", "--from", str(folder), "--quiet")
    time.sleep(RECHECK_S + 0.1)
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


# Part one of the hand-checked history (before the catalog reclassifies emb1-5's holo printing).
PART_ONE = [
    # emb1-1: steady climb; its first printing (normal) is the headline.
    card_row("emb1-1", NORMAL, "2026-08-15", 1000, listing_count=40, low=900, high=1300),
    card_row("emb1-1", NORMAL, "2026-09-10", 1200),
    # emb1-2: flat; quoted once, never again.
    card_row("emb1-2", NORMAL, "2026-08-01", 500),
    # emb1-3: both printings quoted; the normal one's market later disappears.
    card_row("emb1-3", NORMAL, "2026-08-01", 800),
    card_row("emb1-3", FIRST_ED, "2026-08-01", 3000),
    card_row("emb1-3", FIRST_ED, "2026-09-20", 3300),
    # emb1-4: a null market in between is not a price.
    card_row("emb1-4", NORMAL, "2026-08-01", 200),
    card_row("emb1-4", NORMAL, "2026-09-15", None),
    # emb1-5: the holo printing that the catalog will reclassify.
    card_row("emb1-5", HOLO, "2026-08-01", 700),
    card_row("emb1-5", HOLO, "2026-09-20", 750),
    product_row(900001, "2026-08-01", 4999),
]
PART_TWO = [
    card_row("emb1-1", NORMAL, "2026-09-25", 1500),
    card_row("emb1-1", NORMAL, "2026-09-29", 1400),
    card_row("emb1-1", NORMAL, AS_OF, 1710),
    card_row("emb1-3", NORMAL, AS_OF, None),
    card_row("emb1-4", NORMAL, "2026-09-28", 260),
    card_row("emb1-5", HOLO_COSMOS, "2026-09-26", 900),
    card_row("emb1-5", HOLO_COSMOS, AS_OF, 990),
    card_row("emb1-5", HOLO, AS_OF, 1),  # the old printing no longer exists: unmatched, skipped
    product_row(900001, AS_OF, 5499),
]


def reclassify_holo(catalog: Path) -> None:
    """emb1-5's plain holo printing becomes a cosmos-foil holo (a reclassified printing)."""
    path = catalog / "cards.jsonl.gz"
    with gzip.open(path, "rb") as handle:
        cards = [orjson.loads(line) for line in handle]
    for card in cards:
        if card["id"] == "emb1-5":
            for variant in card["variants"]:
                if variant["type"] == "holo" and not variant.get("stamps"):
                    variant["foil"] = "cosmos"
    with gzip.open(path, "wb") as handle:
        handle.writelines(orjson.dumps(card) + b"\n" for card in cards)


@pytest.fixture(scope="module")
def priced(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Service, dict[str, Any], dict[str, Any], int]]:
    """PostgreSQL, the sample catalog, part one of the prices, a reclassification, part two."""
    tmp = tmp_path_factory.mktemp("priced")
    catalog = write_demo_catalog(tmp / "catalog")
    service = launch("postgresql", tmp, catalog)
    try:
        with service.client() as client:
            before = ok(client.get("/v1/cards/emb1-5"))
        catalog_events = len(outbox(service))
        first = prices_sync(service, write_feed(tmp / "feed1", PART_ONE))
        assert first["files_loaded"] == 5 and first["unmatched_card_rows"] == 0
        reclassify_holo(catalog)
        service.cli("catalog", "sync", "--from", str(catalog), "--quiet")
        second = prices_sync(service, write_feed(tmp / "feed2", PART_TWO))
        yield service, before, second, catalog_events
    finally:
        service.stop()


def card(client: httpx.Client, card_id: str, include: str = "variants,change") -> dict[str, Any]:
    rows = ok(
        client.get(
            "/v1/cards", params={"expansion_id": card_id.split("-")[0], "include": include, "limit": 200}
        )
    )
    found = [row for row in rows["items"] if row["id"] == card_id]
    assert len(found) == 1
    return found[0]


def windows(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["window"]: entry for entry in row.get("change", [])}


def variant_id(row: dict[str, Any], printing: dict[str, Any]) -> int:
    matches = [v["id"] for v in row["variants"] if all(v[k] == printing[k] for k in printing)]
    assert len(matches) == 1, (printing, row["variants"])
    return matches[0]


def test_second_sync_reports_the_unmatched_row_of_a_deleted_printing(priced: Any) -> None:
    _, _, report, _ = priced
    assert report["files_loaded"] == 5
    assert report["unmatched_card_rows"] == 1
    assert report["newest_observed_on"] == AS_OF


def test_carry_forward_windows_are_hand_checked(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        row = card(client, "emb1-1")
    got = windows(row)
    headline = variant_id(row, NORMAL)
    assert got["1d"] == {
        "window": "1d",
        "card_variant_id": headline,
        "printing": "normal",
        "start_cents": 1400,
        "end_cents": 1710,
        "change_cents": 310,
        "change_bp": 2214,  # 310 / 1400 = 22.142857%
        "start_as_of": "2026-09-29",
        "observed_on": AS_OF,
    }
    # 7d starts 2026-09-23: the last quote on or before it is 2026-09-10's, carried forward.
    assert (got["7d"]["start_cents"], got["7d"]["start_as_of"], got["7d"]["change_bp"]) == (
        1200,
        "2026-09-10",
        4250,
    )
    assert (got["30d"]["start_cents"], got["30d"]["start_as_of"], got["30d"]["change_bp"]) == (
        1000,
        "2026-08-15",
        7100,
    )
    assert [entry["window"] for entry in row["change"]] == ["1d", "7d", "30d"]


def test_a_flat_card_with_no_rows_for_weeks_shows_no_change(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        got = windows(card(client, "emb1-2"))
    for window in ("1d", "7d", "30d"):
        entry = got[window]
        assert (entry["start_cents"], entry["end_cents"], entry["change_cents"], entry["change_bp"]) == (
            500,
            500,
            0,
            0,
        )
        assert entry["start_as_of"] == entry["observed_on"] == "2026-08-01"


def test_a_disappeared_price_moves_the_headline_to_the_next_printing(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        row = card(client, "emb1-3")
    got = windows(row)
    first_edition = variant_id(row, FIRST_ED)
    assert {entry["card_variant_id"] for entry in got.values()} == {first_edition}
    assert (got["7d"]["start_cents"], got["7d"]["end_cents"], got["7d"]["change_bp"]) == (3300, 3300, 0)
    assert (got["30d"]["start_cents"], got["30d"]["start_as_of"], got["30d"]["change_bp"]) == (
        3000,
        "2026-08-01",
        1000,
    )
    normal = next(v for v in row["variants"] if v["id"] == variant_id(row, NORMAL))
    assert normal["marketplace"][0]["market"] is None and normal["marketplace"][0]["observed_on"] == AS_OF


def test_a_null_market_is_skipped_when_carrying_forward(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        got = windows(card(client, "emb1-4"))
    assert (got["7d"]["start_cents"], got["7d"]["start_as_of"], got["7d"]["end_cents"]) == (
        200,
        "2026-08-01",
        260,
    )
    assert got["7d"]["change_bp"] == 3000
    assert (got["1d"]["start_cents"], got["1d"]["change_cents"]) == (260, 0)


def test_a_reclassified_printing_starts_a_new_history(priced: Any) -> None:
    service, before, _, _ = priced
    with service.client() as client:
        row = card(client, "emb1-5")
    old_id = variant_id(before, HOLO)
    new_id = variant_id(row, HOLO_COSMOS)
    assert new_id != old_id and old_id not in {v["id"] for v in row["variants"]}
    got = windows(row)
    # The new printing has prices only from 2026-09-26: 7d and 30d cannot be computed, so they are absent.
    assert set(got) == {"1d"}
    assert got["1d"]["card_variant_id"] == new_id
    assert (got["1d"]["start_cents"], got["1d"]["end_cents"], got["1d"]["change_bp"]) == (900, 990, 1000)


def test_cards_without_prices_carry_no_change_key(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        rows = ok(client.get("/v1/cards", params={"expansion_id": "tdw1", "include": "change"}))["items"]
        plain = ok(client.get("/v1/cards", params={"expansion_id": "emb1"}))["items"]
    assert rows and all("change" not in row for row in rows)
    assert plain and all("change" not in row for row in plain)


def test_current_prices_are_integer_cents_with_capped_listing_counts(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        detail = ok(client.get("/v1/cards/emb1-1"))
    normal = next(v for v in detail["variants"] if v["id"] == variant_id(detail, NORMAL))
    assert normal["marketplace"] == [
        {
            "condition": "NM",
            "currency": "USD",
            "market": 1710,
            "low": None,
            "high": None,
            "listing_count": None,
            "observed_on": AS_OF,
        }
    ]
    other = next(v for v in detail["variants"] if v["id"] != normal["id"])
    assert other["marketplace"] == []


def test_listing_count_caps_at_25(tmp_path: Path, fresh: Any) -> None:
    service = fresh("sqlite", write_demo_catalog(tmp_path / "catalog"))
    rows = [
        card_row("emb1-1", NORMAL, "2026-08-01", 1000, listing_count=40, low=900, high=1300),
        {**card_row("emb1-1", NORMAL, "2026-08-01", 800, listing_count=3), "condition": "LP"},
    ]
    prices_sync(service, write_feed(tmp_path / "feed", rows))
    with service.client() as client:
        detail = ok(client.get("/v1/cards/emb1-1"))
    normal = next(v for v in detail["variants"] if v["id"] == variant_id(detail, NORMAL))
    assert [(p["condition"], p["market"], p["listing_count"]) for p in normal["marketplace"]] == [
        ("NM", 1000, 25),
        ("LP", 800, 3),
    ]


def test_products_carry_current_prices_with_their_variant(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        product = ok(client.get("/v1/products/900001"))
        listed = ok(client.get("/v1/products", params={"expansion_id": "emb1"}))["items"]
    assert product["marketplace"] == [
        {
            "condition": "NM",
            "currency": "USD",
            "market": 5499,
            "low": 5399,
            "high": 5999,
            "listing_count": 7,
            "observed_on": AS_OF,
            "variant": "Normal",
        }
    ]
    assert next(p for p in listed if p["id"] == 900001)["marketplace"] == product["marketplace"]


def test_leaderboard_ranks_gainers_and_losers(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        gainers = ok(client.get("/v1/movers", params={"window": "30d"}))
        losers = ok(client.get("/v1/movers", params={"window": "30d", "direction": "losers"}))
        week = ok(client.get("/v1/movers", params={"window": "7d", "expansion_id": "emb1"}))
        none = ok(client.get("/v1/movers", params={"window": "7d", "expansion_id": "tdw1"}))
    # 30d: emb1-1 +7100 bp, emb1-4 +3000 bp, emb1-3 +1000 bp; emb1-2 is flat; nothing fell.
    assert [row["id"] for row in gainers["items"]] == ["emb1-1", "emb1-4", "emb1-3"]
    assert gainers["next_cursor"] is None
    assert losers["items"] == []
    assert [row["id"] for row in week["items"]] == ["emb1-1", "emb1-4"]  # +4250, +3000
    assert none == {"items": [], "next_cursor": None}
    top = gainers["items"][0]
    assert {"id", "expansion_id", "name", "number_normalized", "change"} <= set(top)
    assert "score" not in top and "variants" not in top


def test_leaderboard_pages_and_refuses_unknown_windows(priced: Any) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        walked = walk(client, "/v1/movers", window="30d", limit=1)
        bad_window = client.get("/v1/movers", params={"window": "2d"})
        bad_direction = client.get("/v1/movers", params={"direction": "up"})
        floored = ok(client.get("/v1/movers", params={"window": "30d", "min_cents": "1000"}))
        bad_floor = client.get("/v1/movers", params={"min_cents": "-5"})
    assert [row["id"] for row in walked] == ["emb1-1", "emb1-4", "emb1-3"]
    failed(bad_window, 400, "bad_request")
    failed(bad_direction, 400, "bad_request")
    failed(bad_floor, 400, "bad_request")
    # emb1-4 (200 -> 260 cents) and emb1-3 (3000 -> 3300) vs a 1000-cent floor at both ends.
    assert [row["id"] for row in floored["items"]] == ["emb1-1", "emb1-3"]


def test_resync_is_idempotent_and_leaves_etags_alone(priced: Any, tmp_path: Path) -> None:
    service, _, _, _ = priced
    with service.client() as client:
        before = client.get("/v1/cards", params={"include": "variants,change"})
        again = prices_sync(service, write_feed(tmp_path / "again", PART_TWO))
        after = client.get("/v1/cards", params={"include": "variants,change"})
    # Same rows, new gzip bytes: the files are read again, and nothing is written.
    assert again["files_loaded"] == 5
    assert (again["log_rows_written"], again["current_rows_written"], again["events"]) == (0, 0, 0)
    assert before.headers["ETag"] == after.headers["ETag"]


def test_a_late_day_never_overwrites_a_newer_quote(tmp_path: Path, fresh: Any) -> None:
    service = fresh("sqlite", write_demo_catalog(tmp_path / "catalog"))
    prices_sync(service, write_feed(tmp_path / "new", [card_row("emb1-1", NORMAL, "2026-09-30", 2000)]))
    late = prices_sync(
        service, write_feed(tmp_path / "late", [card_row("emb1-1", NORMAL, "2026-09-20", 1000)])
    )
    assert late["log_rows_written"] == 1 and late["current_rows_written"] == 0
    with service.client() as client:
        row = card(client, "emb1-1")
    assert row["variants"][0]["marketplace"][0]["market"] == 2000
    # The late day is history all the same: the 7d window now starts from it.
    assert (windows(row)["7d"]["start_cents"], windows(row)["7d"]["start_as_of"]) == (1000, "2026-09-20")


def snapshot_entries(service: Service) -> list[dict[str, Any]]:
    """The snapshot entries of the events the price syncs wrote (the deliveries' bodies)."""
    return [
        {**entry, "name": event["name"]}
        for event in outbox(service)
        if event["name"].endswith("_prices.snapshot")
        for entry in event["data"]["snapshot"]
    ]


def local(service: Service, url: str) -> str:
    """The URL on this test's server (events name the configured public base, not the test's port)."""
    path = url.split("/files/", 1)[1]
    return f"{service.base_url}/files/{path}"


def test_snapshot_files_verify_against_their_digest(priced: Any) -> None:
    service, _, _, _ = priced
    entries = snapshot_entries(service)
    latest = {entry["name"]: entry for entry in entries}
    assert set(latest) == {"cardgame.card_prices.snapshot", "cardgame.product_prices.snapshot"}
    for name, entry in latest.items():
        assert entry["snapshot_date"] == AS_OF
        assert entry["url"].split("?")[0].endswith(".ndjson.gz")
        assert entry["url"].startswith("http://127.0.0.1:8000/files/snapshots/")  # CARDCAT_PUBLIC_URL
        body = httpx.get(local(service, entry["url"]), timeout=10)
        assert body.status_code == 200
        assert hashlib.sha256(body.content).hexdigest() == entry["sha256"]
        assert len(body.content) == entry["bytes"]
        rows = [json.loads(line) for line in gzip.decompress(body.content).splitlines()]
        assert len(rows) == entry["rows"]
        key = "card_id" if name.startswith("cardgame.card") else "product_id"
        assert len({row[key] for row in rows}) == entry["subjects"] <= entry["rows"]
    cards = [
        json.loads(line)
        for line in gzip.decompress(
            httpx.get(local(service, latest["cardgame.card_prices.snapshot"]["url"])).content
        ).splitlines()
    ]
    emb11 = [row for row in cards if row["card_id"] == "emb1-1"]
    assert [(row["printing"]["type"], row["market"], row["observed_on"]) for row in emb11] == [
        ("normal", 1710, AS_OF)
    ]


def test_snapshot_urls_need_their_signature(priced: Any) -> None:
    service, _, _, _ = priced
    url = local(service, snapshot_entries(service)[-1]["url"])
    base, query = url.split("?")
    tampered = url.replace("signature=", "signature=0")
    for bad in (base, tampered, base + "?expires=1&signature=" + "0" * 64):
        assert httpx.get(bad, timeout=10).status_code == 401
    other = base.rsplit("/", 1)[0] + "/..%2F..%2Fcardcat.db?" + query
    assert httpx.get(other, timeout=10).status_code in (401, 404)


def test_real_feed_format_loads_every_row(tmp_path: Path, fresh: Any) -> None:
    """marketfeed.py's own output over two real expansions: everything maps, and a second run skips."""
    require_shared()
    from cardcat.stack import write_subset_feed

    catalog = write_subset_feed(tmp_path / "catalog", ("base1", "swsh10tg"))
    subprocess.run(
        [
            sys.executable,
            str(SHARED / "tools" / "marketfeed.py"),
            "--catalog",
            str(catalog),
            "--out",
            str(tmp_path / "market"),
            "--start",
            "2026-08-01",
            "--days",
            "40",
            "--expansion",
            "base1",
            "--expansion",
            "swsh10tg",
        ],
        check=True,
        capture_output=True,
    )
    service = fresh("postgresql", catalog)
    first = prices_sync(service, tmp_path / "market")
    assert first["files_loaded"] == 40 and first["unmatched_card_rows"] == 0 and first["card_rows"] > 1000
    second = prices_sync(service, tmp_path / "market")
    assert second["files_skipped"] == 40 and second["log_rows_written"] == 0
    with service.client() as client:
        movers = ok(client.get("/v1/movers", params={"window": "30d", "limit": 5}))["items"]
        losers = ok(client.get("/v1/movers", params={"window": "30d", "direction": "losers", "limit": 5}))[
            "items"
        ]
    bps = [windows(row)["30d"]["change_bp"] for row in movers]
    assert bps == sorted(bps, reverse=True) and bps[0] > 0
    assert all(windows(row)["30d"]["change_bp"] < 0 for row in losers)


def outbox(service: Service) -> list[dict[str, Any]]:
    """Every event body written so far, in order."""
    from sqlalchemy import create_engine, text

    from catalog_api.kit.settings import normalise_database_url

    engine = create_engine(normalise_database_url(service.db.url))
    with engine.connect() as conn:
        bodies = conn.execute(text("SELECT body FROM events ORDER BY seq")).scalars().all()
    engine.dispose()
    return [orjson.loads(body) for body in bodies]


def test_price_syncs_emit_product_updates_and_snapshots_only(priced: Any) -> None:
    service, _, _, catalog_events = priced
    events = outbox(service)[catalog_events:]  # after the initial catalog load's own events
    names = [event["name"] for event in events]
    # Sync 1 (prices), the catalog sync (reclassification), sync 2 (prices); the idempotent re-run of
    # test_resync_is_idempotent_and_leaves_etags_alone adds nothing.
    price_run = [
        "cardgame.products.updated",
        "cardgame.card_prices.snapshot",
        "cardgame.product_prices.snapshot",
    ]
    assert names[:3] == price_run
    assert sorted(names[3:5]) == ["cardgame.card_variants.deleted", "cardgame.cards.updated"]
    assert names[5:] == price_run
    for index in (0, 5):
        products = events[index]["data"]["products"]
        assert [p["id"] for p in products] == [900001]  # the one product the feed priced
        assert products[0]["marketplace"][0]["variant"] == "Normal"
    assert events[5]["data"]["products"][0]["marketplace"][0]["market"] == 5499


def test_a_corrupt_day_file_stops_the_run_and_loads_nothing(tmp_path: Path, fresh: Any) -> None:
    service = fresh("sqlite", write_demo_catalog(tmp_path / "catalog"))
    feed = write_feed(tmp_path / "feed", [card_row("emb1-1", NORMAL, "2026-09-01", 1000)])
    (feed / "marketplace" / "2026-09-02.ndjson.gz").write_bytes(gzip.compress(b'{"subject": "card"}\n')[:-9])
    result = service.cli("prices", "sync", "--from", str(feed), "--quiet", check=False)
    assert result.returncode != 0
    assert "2026-09-02.ndjson.gz" in result.stderr and "nothing was loaded" in result.stderr
    assert "Traceback" not in result.stderr
    with service.client() as client:
        detail = ok(client.get("/v1/cards/emb1-1"))
    assert all(v["marketplace"] == [] for v in detail["variants"])  # the good day was rolled back too
