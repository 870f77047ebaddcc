"""`cardcat catalog sync`, end to end: the real CLI loads a real feed folder into PostgreSQL and SQLite and
the real server serves what it loaded.

- Idempotent: the same folder twice writes nothing, and the API's bodies and ETags do not move.
- Incremental: edits to a copy of the feed (gzip JSON Lines) touch only what they changed.
- Quirks of the real feed, as decided in `catalog_api/ingest/feed.py`.
- Nothing is lost: every card line is served, with every distinct printing.
- Images: `--images` ingests the renderer's faces; the server serves them back byte for byte.

The sync's stdout is one JSON line of counts (`SyncReport.summary()` plus `seconds`).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from cardcat.stack import SHARED, SHARED_CATALOG, Service, launch, require_shared, unavailable
from catalog_api.catalog.readmodel import RECHECK_S
from catalog_api.catalog.schemas import Card, CardSummary, Expansion, Series
from catalog_api.kit.schemas import Envelope, Page
from tests.catalog_api.helpers import eventually, failed, ok, walk

Record = dict[str, Any]
T = TypeVar("T")
BACKENDS = ["postgresql", "sqlite"]
# The counters of a sync report that say something changed (the rest are tallies).
CHANGES = (
    "series_created",
    "series_updated",
    "expansions_created",
    "expansions_updated",
    "cards_created",
    "cards_updated",
    "variants_deleted",
    "products_updated",
    "products_removed",
)
SNAKE = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
IMAGE_URL = re.compile(r"/images/([0-9a-f]{64})/(low|high)\.jpg")


# --- helpers ---------------------------------------------------------------------------------------


def read_records(folder: Path, name: str) -> list[Record]:
    with gzip.open(folder / f"{name}.jsonl.gz", "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()]


def write_records(folder: Path, name: str, records: list[Record]) -> None:
    with gzip.open(folder / f"{name}.jsonl.gz", "wb") as handle:
        for record in records:
            handle.write(orjson.dumps(record) + b"\n")


def edit(folder: Path, name: str, change: Callable[[list[Record]], list[Record]]) -> None:
    write_records(folder, name, change(read_records(folder, name)))


def sync(service: Service, folder: Path, *extra: str) -> dict[str, Any]:
    """Run `cardcat catalog sync` and return its report (stdout is exactly one JSON line).

    Reads are answered from a per-worker cache keyed by the feed versions, which a worker re-reads at
    most every RECHECK_S: the documented bound on how long a sync takes to show. Waiting that long here
    lets every test read right after a sync."""
    result = service.cli("catalog", "sync", "--from", str(folder), "--quiet", *extra)
    time.sleep(RECHECK_S + 0.1)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    report: dict[str, Any] = json.loads(lines[0])
    assert set(CHANGES) <= set(report) and "cards_seen" in report, report
    return report


def assert_changes(report: dict[str, Any], **expected: int) -> None:
    """Exactly these change counters are non-zero, with these values."""
    assert {key: report[key] for key in CHANGES} == {key: expected.get(key, 0) for key in CHANGES}, report


def printing(variant: Record) -> tuple[Any, ...]:
    """The five fields that name a printing; stamps are a set (a card may list them in either order)."""
    return (
        variant["type"],
        variant["subtype"],
        variant["size"],
        tuple(sorted(variant["stamps"] or [])),
        variant["foil"],
    )


def distinct_printings(record: Record) -> list[tuple[Any, ...]]:
    """A feed card's printings with repeats dropped, first occurrence kept."""
    seen: dict[tuple[Any, ...], None] = {}
    for variant in record.get("variants") or []:
        seen.setdefault(printing(variant), None)
    return list(seen)


def card(client: httpx.Client, card_id: str) -> Record:
    response = client.get(f"/v1/cards/{card_id}")
    Envelope[Card].model_validate(response.json())
    data: Record = ok(response)
    return data


# --- idempotent ------------------------------------------------------------------------------------


def capture(client: httpx.Client) -> dict[str, tuple[bytes, str]]:
    """Body and ETag of every card page (with every include) and of the reference lists and a detail."""
    captured: dict[str, tuple[bytes, str]] = {}
    paths = [
        "/v1/series?limit=200",
        "/v1/expansions?limit=200",
        "/v1/products?limit=200",
        "/v1/cards?q=pikachu",
    ]
    cursor = None
    for _ in range(1000):
        path = "/v1/cards?limit=200&include=variants,metadata" + (f"&cursor={cursor}" if cursor else "")
        response = client.get(path)
        captured[path] = (response.content, response.headers["ETag"])
        cursor = ok(response)["next_cursor"]
        if cursor is None:
            break
        first_id = ok(response)["items"][0]["id"]
        paths.append(f"/v1/cards/{first_id}")
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, response.text
        captured[path] = (response.content, response.headers["ETag"])
    return captured


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_sync_of_the_same_feed_changes_nothing(backend: str, fresh: Any, feed_dir: Path) -> None:
    service = fresh(backend)
    cards = read_records(feed_dir, "cards")
    first = sync(service, feed_dir)
    assert first["cards_seen"] == first["cards_created"] == len(cards)
    assert first["series_created"] == len(read_records(feed_dir, "series"))
    assert first["expansions_created"] == len(read_records(feed_dir, "expansions"))
    assert first["products_updated"] == len({p["id"] for p in read_records(feed_dir, "products")})
    with service.client() as client:

        def loaded() -> None:  # the server started before the first sync; it re-reads within RECHECK_S
            assert ok(client.get("/v1/expansions"))["items"]

        eventually(loaded)
        before = capture(client)
        second = sync(service, feed_dir)
        assert_changes(second)
        assert second["cards_seen"] == len(cards) and second["images_ingested"] == 0
        time.sleep(RECHECK_S)  # past the snapshot re-check, in case the sync moved the version
        after = capture(client)
        assert after.keys() == before.keys()
        for path, (body, etag) in before.items():
            assert after[path] == (body, etag), path
            assert client.get(path, headers={"If-None-Match": etag}).status_code == 304, path


# --- incremental: one deployment per backend, a copy of the feed edited test by test ------------------


@dataclass
class Live:
    service: Service
    feed: Path
    client: httpx.Client

    def sync(self) -> dict[str, Any]:
        report = sync(self.service, self.feed)
        assert report["cards_seen"] == len(read_records(self.feed, "cards"))
        return report


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, feed_dir: Path
) -> Iterator[Live]:
    require_shared()  # the edits name cards and products of the real feed
    root = tmp_path_factory.mktemp(f"incremental-{request.param}")
    feed = Path(shutil.copytree(feed_dir, root / "feed"))
    deployment = root / "deployment"
    deployment.mkdir()
    service = launch(request.param, deployment, feed)
    try:
        with service.client() as client:
            yield Live(service, feed, client)
    finally:
        service.stop()


def test_renamed_card_is_the_only_card_updated(live: Live) -> None:
    before = card(live.client, "base1-4")

    def rename(cards: list[Record]) -> list[Record]:
        for record in cards:
            if record["id"] == "base1-4":
                record["name"] = "Charizard Resynced"
        return cards

    edit(live.feed, "cards", rename)
    assert_changes(live.sync(), cards_updated=1)
    after = card(live.client, "base1-4")
    assert after == {**before, "name": "Charizard Resynced"}  # variant ids and all else unchanged

    def found() -> None:
        hits = ok(live.client.get("/v1/cards", params={"q": "Charizard Resynced"}))["items"]
        assert hits[0]["id"] == "base1-4" and hits[0]["score"] == 1.0

    eventually(found)


def test_another_languages_name_is_written_quietly(live: Live) -> None:
    """A card whose only change is a name in another language: no `cards.updated` (no served record
    changed), yet `lang` and search serve the new name after the sync."""
    before = card(live.client, "base1-2")

    def rename(cards: list[Record]) -> list[Record]:
        for record in cards:
            if record["id"] == "base1-2":
                record["names"] = {**(record.get("names") or {}), "de": "Turtok Neu"}
        return cards

    edit(live.feed, "cards", rename)
    assert_changes(live.sync())
    assert card(live.client, "base1-2") == before

    def served() -> None:
        detail = ok(live.client.get("/v1/cards/base1-2", params={"lang": "de", "include": "names"}))
        assert detail["name"] == "Turtok Neu" and detail["names"]["de"] == "Turtok Neu"
        hits = ok(live.client.get("/v1/cards", params={"q": "Turtok Neu"}))["items"]
        assert hits[0]["id"] == "base1-2" and hits[0]["score"] == 1.0

    eventually(served)


def test_a_database_from_before_names_gets_them_on_the_next_sync(live: Live) -> None:
    """Migration 0003 adds `cards.names` and `expansions.names` empty; the next sync fills them without
    reporting any card or expansion as updated."""
    from sqlalchemy import create_engine, select, text

    from catalog_api.kit.models import Card as CardRow
    from catalog_api.kit.models import Expansion as ExpansionRow

    engine = create_engine(live.service.db.url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE cards SET names = NULL"))
            # An expansion's stored hash predates its names too (the hash covers every stored field).
            conn.execute(text("UPDATE expansions SET names = NULL, content_hash = ''"))
        assert_changes(live.sync())
        with engine.connect() as conn:
            stored = {
                model.__tablename__: dict(conn.execute(select(model.id, model.names)).all())
                for model in (CardRow, ExpansionRow)
            }
    finally:
        engine.dispose()
    for table in ("cards", "expansions"):
        expected = {
            str(r["id"]): {k: v for k, v in (r.get("names") or {}).items() if v} or None
            for r in read_records(live.feed, table)
        }
        assert any(expected.values())
        assert {key: stored[table].get(key) for key in expected} == expected, table

    def served() -> None:
        assert ok(live.client.get("/v1/cards/base1-4", params={"lang": "de"}))["name"] == "Glurak"

    eventually(served)


def test_new_card_is_created(live: Live) -> None:
    failed(live.client.get("/v1/cards/base1-103"), 404, "not_found")

    def add(cards: list[Record]) -> list[Record]:
        model = next(r for r in cards if r["id"] == "base1-1")
        return [*cards, {**model, "id": "base1-103", "number": "103", "name": "Syncmon"}]

    edit(live.feed, "cards", add)
    assert_changes(live.sync(), cards_created=1)
    created = card(live.client, "base1-103")
    assert created["name"] == "Syncmon" and created["number"] == "103" and created["expansion_id"] == "base1"
    rows = walk(live.client, "/v1/cards", expansion_id="base1", limit=200, include="variants")
    assert rows[-1]["id"] == "base1-103"  # numeric, highest number in its expansion
    assert rows[-1]["variants"] == created["variants"] and created["variants"]


def _reclassify(live: Live, card_id: str, index: int) -> tuple[Record, Record]:
    """Change the `type` of the printing at `index` of a card; returns the card before and after."""
    before = card(live.client, card_id)
    held = {printing(v) for v in before["variants"]}
    old = before["variants"][index]
    new_type = next(
        t for t in ("reverse", "holo", "normal", "metal") if printing({**old, "type": t}) not in held
    )

    def change(cards: list[Record]) -> list[Record]:
        for record in cards:
            if record["id"] == card_id:
                positions = [i for i, v in enumerate(record["variants"]) if printing(v) == printing(old)]
                for position in positions:
                    record["variants"][position]["type"] = new_type
        return cards

    edit(live.feed, "cards", change)
    assert_changes(live.sync(), cards_updated=1, variants_deleted=1)
    after = card(live.client, card_id)
    assert [printing(v) for v in after["variants"]] == [
        printing({**v, "type": new_type}) if i == index else printing(v)
        for i, v in enumerate(before["variants"])
    ]
    return before, after


def test_reclassified_printing_gets_a_new_id_and_its_siblings_keep_theirs(live: Live) -> None:
    before, after = _reclassify(live, "base1-2", 1)
    assert len(before["variants"]) >= 3
    old_ids = [v["id"] for v in before["variants"]]
    new_ids = [v["id"] for v in after["variants"]]
    assert old_ids[1] not in new_ids, "the reclassified printing's old id must be gone"
    assert new_ids[1] not in old_ids, "the reclassified printing needs a new id"
    assert new_ids[:1] + new_ids[2:] == old_ids[:1] + old_ids[2:], "the other printings keep their ids"


def test_reclassifying_the_newest_printing_never_reuses_its_id(live: Live) -> None:
    """Spec, Variant.id: "when a printing is reclassified, the old id is deleted ... and a new id takes its
    place". The printing with the highest id is the case an id allocator gets wrong (SQLite hands out
    max(rowid)+1 unless the table is AUTOINCREMENT, so a deleted highest id comes straight back)."""
    every = walk(live.client, "/v1/cards", limit=200, include="variants")
    newest_id, card_id, index = max(
        (v["id"], row["id"], i) for row in every for i, v in enumerate(row["variants"])
    )
    every_id = {v["id"] for row in every for v in row["variants"]}
    _, after = _reclassify(live, card_id, index)
    replacement = after["variants"][index]["id"]
    assert replacement != newest_id, (
        f"{card_id}: the reclassified printing got its deleted id {newest_id} back"
    )
    assert replacement not in every_id


def test_removed_or_detached_product_is_removed(live: Live) -> None:
    for product_id in (500017, 500016):
        assert ok(live.client.get(f"/v1/products/{product_id}"))["id"] == product_id
    edit(live.feed, "products", lambda products: [p for p in products if p["id"] != 500017])
    assert_changes(live.sync(), products_removed=1)
    # Products are read from the worker's snapshot, which follows a sync within about RECHECK_S.
    eventually(lambda: failed(live.client.get("/v1/products/500017"), 404, "not_found"))

    # Listed under no expansion any more counts as removed too (sync.py).
    def detach(products: list[Record]) -> list[Record]:
        return [{**p, "expansions": []} if p["id"] == 500016 else p for p in products]

    edit(live.feed, "products", detach)
    assert_changes(live.sync(), products_removed=1)
    eventually(lambda: failed(live.client.get("/v1/products/500016"), 404, "not_found"))
    assert_changes(live.sync())  # and it stays removed without flapping

    def gone() -> None:
        listed = {p["id"] for p in walk(live.client, "/v1/products", limit=200)}
        assert 500015 in listed and not listed & {500016, 500017}
        assert [p["id"] for p in walk(live.client, "/v1/products", expansion_id="base4")] == [500015]

    eventually(gone)


def test_new_series_and_expansion_are_created_and_listed(live: Live) -> None:
    series = {"id": "zzsync", "name": "Sync Test Series", "names": {"en": "Sync Test Series"}}
    series["first_release_date"] = "2031-01-01"
    expansion = {
        "id": "zzsync1",
        "series_id": "zzsync",
        "name": "Sync Test Expansion",
        "names": {"en": "Sync Test Expansion"},
        "release_date": "2031-01-02",
        "card_count_total": 1,
        "card_count_official": 1,
        "legal_standard": True,
        "legal_expanded": True,
        "code": "SYT",
        "ptcgo_code": None,
        "abbreviations": None,
        "logo_url": None,
        "symbol_url": None,
    }
    edit(live.feed, "series", lambda rows: [*rows, series])
    edit(live.feed, "expansions", lambda rows: [*rows, expansion])

    def add_card(cards: list[Record]) -> list[Record]:
        model = next(r for r in cards if r["id"] == "base1-1")
        return [*cards, {**model, "id": "zzsync1-1", "expansion_id": "zzsync1", "series_id": "zzsync"}]

    edit(live.feed, "cards", add_card)
    assert_changes(live.sync(), series_created=1, expansions_created=1, cards_created=1)

    def listed() -> None:
        expansions = ok(live.client.get("/v1/expansions", params={"limit": 200}))["items"]
        assert expansions[-1]["id"] == "zzsync1"  # the latest release
        all_series = ok(live.client.get("/v1/series", params={"limit": 200}))["items"]
        assert all_series[-1]["id"] == "zzsync"

    eventually(listed)
    record = Envelope[Expansion].model_validate(live.client.get("/v1/expansions/zzsync1").json()).data
    assert (record.name, record.series_id, record.release_date, record.card_count_total) == (
        "Sync Test Expansion",
        "zzsync",
        "2031-01-02",
        1,
    )
    assert record.legal_standard and record.legal_expanded and record.logo is None
    served_series = Envelope[Series].model_validate(live.client.get("/v1/series/zzsync").json()).data
    assert served_series.name == "Sync Test Series" and [e.id for e in served_series.expansions] == [
        "zzsync1"
    ]
    assert [
        e["id"] for e in ok(live.client.get("/v1/expansions", params={"series_id": "zzsync"}))["items"]
    ] == ["zzsync1"]
    assert [c["id"] for c in walk(live.client, "/v1/cards", expansion_id="zzsync1")] == ["zzsync1-1"]


def test_card_missing_from_the_feed_is_still_served(live: Live) -> None:
    """sync.py: cards that vanish from the feed are kept (the spec has no card deletion yet)."""
    before = card(live.client, "base1-5")
    edit(live.feed, "cards", lambda cards: [c for c in cards if c["id"] != "base1-5"])
    assert_changes(live.sync())
    assert card(live.client, "base1-5") == before
    assert "base1-5" in {c["id"] for c in walk(live.client, "/v1/cards", expansion_id="base1", limit=200)}


def test_expansion_release_date_correction_reports_no_card_as_updated(live: Live) -> None:
    """A re-dated expansion moves its cards in catalog order, but no card record changes: the spec's
    `cardgame.cards.updated` fires only when a card's name, rarity, illustrator, category, metadata or
    variants changed, and sync.py's report lists what changed for those events."""
    cards_before = {
        c["id"]: c for c in walk(live.client, "/v1/cards", expansion_id="2011bw", include="variants")
    }
    edit(
        live.feed,
        "expansions",
        lambda rows: [{**e, "release_date": "1990-01-01"} if e["id"] == "2011bw" else e for e in rows],
    )
    report = live.sync()
    assert report["expansions_updated"] == 1

    def reordered() -> None:
        first = ok(live.client.get("/v1/expansions", params={"limit": 1}))["items"][0]
        assert (first["id"], first["release_date"]) == ("2011bw", "1990-01-01")

    eventually(reordered)
    page = ok(live.client.get("/v1/cards", params={"limit": len(cards_before), "include": "variants"}))[
        "items"
    ]
    assert [c["expansion_id"] for c in page] == ["2011bw"] * len(cards_before)
    assert {c["id"]: {k: v for k, v in c.items() if k != "number_normalized"} for c in page} == {
        k: {f: v for f, v in c.items() if f != "number_normalized"} for k, c in cards_before.items()
    }
    assert report["cards_updated"] == 0, (
        f"{report['cards_updated']} cards reported updated though no card record changed"
    )


# --- quirks of the real feed (feed.py) and nothing lost ----------------------------------------------


@pytest.fixture(scope="module")
def served(service: Service) -> dict[str, Record]:
    """Every card the service holds, with variants and metadata, walked at the largest page size."""
    with service.client(service.new_key("sync-tests")) as client:
        rows = walk(client, "/v1/cards", limit=200, include="variants,metadata")
    Envelope[Page[CardSummary]].model_validate({"data": {"items": rows, "next_cursor": None}, "error": None})
    return {row["id"]: row for row in rows}


@pytest.fixture(scope="module")
def feed_cards(feed_dir: Path) -> dict[str, Record]:
    return {record["id"]: record for record in read_records(feed_dir, "cards")}


def test_every_card_line_is_served_with_every_distinct_printing(
    served: dict[str, Record], feed_cards: dict[str, Record], feed_dir: Path
) -> None:
    with gzip.open(feed_dir / "cards.jsonl.gz", "rb") as handle:
        lines = sum(1 for line in handle if line.strip())
    assert len(served) == lines == len(feed_cards)
    assert served.keys() == feed_cards.keys()
    for card_id, row in served.items():
        expected = distinct_printings(feed_cards[card_id])
        assert [printing(v) for v in row["variants"]] == expected, card_id
        assert row["name"], card_id
        assert row["expansion_id"] == feed_cards[card_id]["expansion_id"]


def test_card_without_an_english_name_is_served_under_its_french_name(
    served: dict[str, Record], feed_cards: dict[str, Record]
) -> None:
    require_shared()
    french_only = [r for r in feed_cards.values() if r["expansion_id"] == "2013bw"]
    assert len(french_only) == 12
    for record in french_only:
        assert not record.get("name") and not record["names"].get("en") and record["names"]["fr"]
        assert served[record["id"]]["name"] == record["names"]["fr"]
    assert served["2013bw-1"]["name"] == "Phyllali"


def test_rarity_none_is_served_as_null(served: dict[str, Record], feed_cards: dict[str, Record]) -> None:
    require_shared()
    mcdonalds = [r for r in feed_cards.values() if r["expansion_id"] == "2011bw"]
    assert mcdonalds and all(r["rarity"] == "None" for r in mcdonalds)
    assert all(served[r["id"]]["rarity"] is None for r in mcdonalds)
    for card_id, record in feed_cards.items():
        expected = None if record["rarity"] in (None, "", "None") else record["rarity"]
        assert served[card_id]["rarity"] == expected, card_id


def test_duplicate_printing_is_kept_once(service: Service, feed_cards: dict[str, Record]) -> None:
    require_shared()
    doubled = [
        r
        for r in feed_cards.values()
        if r["expansion_id"] == "ex14" and len(distinct_printings(r)) < len(r["variants"])
    ]
    assert doubled, "ex14 should hold a card that lists one printing twice"
    with service.client() as client:
        for record in doubled:
            variants = card(client, record["id"])["variants"]
            keys = [printing(v) for v in variants]
            assert len(keys) == len(set(keys)) == len(distinct_printings(record)) < len(record["variants"])
            assert len({v["id"] for v in variants}) == len(variants)


def test_numbers_keep_their_printed_form_and_fold_in_number_normalized(
    served: dict[str, Record], feed_cards: dict[str, Record]
) -> None:
    require_shared()
    for card_id, record in feed_cards.items():
        assert served[card_id]["number"] == record["number"], card_id
    folded = {
        "miscp-001": ("001", "1"),
        "swsh10tg-TG05": ("TG05", "TG5"),
        "swsh10tg-TG10": ("TG10", "TG10"),
        "sma-SV1": ("SV1", "SV1"),
        "base1-4": ("4", "4"),
    }
    for card_id, pair in folded.items():
        assert (served[card_id]["number"], served[card_id]["number_normalized"]) == pair, card_id


def test_weakness_and_resistance_modifiers_are_ascii(
    served: dict[str, Record], feed_cards: dict[str, Record]
) -> None:
    require_shared()
    times_sign = 0
    for card_id, row in served.items():
        metadata = row["metadata"] or {}
        for kind in ("weaknesses", "resistances"):
            upstream = feed_cards[card_id].get(kind) or []
            entries = metadata.get(kind) or []
            assert [e["type"] for e in entries] == [e["type"] for e in upstream], card_id
            for entry, source in zip(entries, upstream, strict=True):
                modifier = entry["modifier"]
                assert modifier is None or (modifier.isascii() and "×" not in modifier), (card_id, modifier)
                if source["modifier"] == "×2":
                    times_sign += 1
                    assert modifier == "x2", card_id
                elif source["modifier"] and source["modifier"].isascii():
                    assert modifier == source["modifier"], card_id
    assert times_sign > 100, "the subset should hold many '×2' weaknesses"


def test_ability_kinds_are_snake_case(served: dict[str, Record], feed_cards: dict[str, Record]) -> None:
    require_shared()
    known = {
        "Ability": "ability",
        "Poke-POWER": "poke_power",
        "Poke-BODY": "poke_body",
        "Pokemon Power": "pokemon_power",
    }
    seen: set[str] = set()
    for card_id, row in served.items():
        abilities = (row["metadata"] or {}).get("abilities") or []
        upstream = feed_cards[card_id].get("abilities") or []
        assert len(abilities) == len(upstream), card_id
        for ability, source in zip(abilities, upstream, strict=True):
            assert SNAKE.fullmatch(ability["kind"]), (card_id, ability["kind"])
            if source.get("kind") in known:
                assert ability["kind"] == known[source["kind"]], card_id
                seen.add(source["kind"])
    assert seen == set(known)


# --- images ----------------------------------------------------------------------------------------

PUBLIC_URL = "http://images.cardcat.test"


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory, feed_dir: Path) -> Path:
    """Five base1 faces drawn by ../shared/tools/cardrender.py (about 20 cards a second)."""
    require_shared()
    if importlib.util.find_spec("numpy") is None:
        unavailable("numpy is not installed: ../shared/tools/cardrender.py needs it (pip install numpy)")
    out = tmp_path_factory.mktemp("renders")
    command = [
        sys.executable,
        str(SHARED / "tools" / "cardrender.py"),
        "--cards",
        str(feed_dir / "cards.jsonl.gz"),
        "--expansions",
        str(feed_dir / "expansions.jsonl.gz"),
        "--out",
        str(out),
        "--expansion",
        "base1",
        "--limit",
        "5",
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    assert len([p for p in out.iterdir() if p.is_dir()]) == 5
    return out


def test_sync_with_images_serves_the_rendered_faces(fresh: Any, feed_dir: Path, renders: Path) -> None:
    """One backend is enough: the database holds only a content key per card; the files are the point."""
    rendered = sorted(p.name for p in renders.iterdir() if p.is_dir())
    service = fresh("sqlite", None, CARDCAT_PUBLIC_URL=PUBLIC_URL)
    report = sync(service, feed_dir, "--images", str(renders))
    assert report["images_ingested"] == 5 and report["cards_created"] == len(read_records(feed_dir, "cards"))
    with service.client() as client:
        rows = walk(client, "/v1/cards", expansion_id="base1", limit=200)
        rows += ok(client.get("/v1/cards", params={"expansion_id": "base4", "limit": 5}))["items"]
        with_image = {row["id"]: row["image"] for row in rows if row["image"] is not None}
        assert sorted(with_image) == rendered, "exactly the rendered cards have an image"
        for card_id in rendered:
            image = with_image[card_id]
            assert card(client, card_id)["image"] == image
            for size in ("low", "high"):
                url = image[size]
                assert url.startswith(PUBLIC_URL + "/"), url
                match = IMAGE_URL.fullmatch(url.removeprefix(PUBLIC_URL))
                assert match and match.group(2) == size, url
                response = httpx.get(service.base_url + url.removeprefix(PUBLIC_URL), timeout=30)
                assert response.status_code == 200
                assert response.headers["content-type"] == "image/jpeg"
                assert response.content == (renders / card_id / f"{size}.jpg").read_bytes()
        key = IMAGE_URL.fullmatch(with_image[rendered[0]]["high"].removeprefix(PUBLIC_URL)).group(1)  # type: ignore[union-attr]

        # The same images again, then a sync without --images: nothing changes, nothing is dropped.
        assert_changes(sync(service, feed_dir, "--images", str(renders)))
        assert_changes(sync(service, feed_dir))
        assert card(client, rendered[0])["image"] == with_image[rendered[0]]

    hostile = [
        "/images/..%2F..%2Fetc%2Fpasswd/high.jpg",
        "/images/..%2F..%2F..%2F..%2Fetc%2Fpasswd/high.jpg",
        f"/images/{key[:2]}%2F{key}-high.jpg/high.jpg",
        "/images/" + "g" * 64 + "/high.jpg",
        "/images/not-a-key/high.jpg",
        f"/images/{key[:-1]}/high.jpg",
        f"/images/{key}/medium.jpg",
        f"/images/{key}/..%2F..%2Fcardcat.db",
    ]
    for path in hostile:
        response = httpx.get(service.base_url + path, timeout=30)
        assert response.status_code == 404, path
        assert not response.content.startswith(b"\xff\xd8") and b"root:" not in response.content, path


# --- the whole catalog -----------------------------------------------------------------------------


@pytest.mark.slow
def test_full_catalog_syncs_into_postgresql_in_under_two_minutes(fresh: Any) -> None:
    require_shared()
    cards = read_records(SHARED_CATALOG, "cards")
    assert len(cards) == 21_159
    service = fresh("postgresql")
    started = time.monotonic()
    first = sync(service, SHARED_CATALOG)
    elapsed = time.monotonic() - started
    assert first["cards_seen"] == first["cards_created"] == 21_159
    assert first["duplicate_printings_dropped"] == sum(
        len(c.get("variants") or []) - len(distinct_printings(c)) for c in cards
    )
    assert elapsed < 120, f"full catalog sync took {elapsed:.1f} s"

    second = sync(service, SHARED_CATALOG)
    assert_changes(second)
    assert second["cards_seen"] == 21_159
    with service.client() as client:
        assert len(walk(client, "/v1/expansions", limit=200)) == len(
            read_records(SHARED_CATALOG, "expansions")
        )
        assert len(walk(client, "/v1/series", limit=200)) == len(read_records(SHARED_CATALOG, "series"))
        assert card(client, "swsh10tg-TG05")["number"] == "TG05"
