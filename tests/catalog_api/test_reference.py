"""Series, expansions and sealed products: `/v1/series`, `/v1/expansions`, `/v1/products` and their detail
reads. Record shapes are the spec's Events section (expansion, series and product records); the order of
each list is the one documented in `routes/reference.py`. Expectations are derived from the feed folder
the `service` fixture was loaded from, so a walk is checked against what went in, not against itself.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from pydantic import BaseModel

from cardcat.stack import Service, require_shared
from catalog_api.catalog.schemas import Expansion, Product, Series
from catalog_api.ingest.feed import feed_path, read_jsonl
from catalog_api.kit.schemas import Envelope, ErrorEnvelope, Page
from tests.catalog_api.helpers import failed, ok, walk

Record = dict[str, Any]
ENDPOINTS: dict[str, type[BaseModel]] = {"series": Series, "expansions": Expansion, "products": Product}
COLOUR = re.compile(r"#[0-9a-f]{6}")
SERIES_EXPANSION_KEYS = ("id", "name", "logo", "symbol", "palette", "release_date", "card_count_total")


def read_feed(feed_dir: Path, name: str) -> list[Record]:
    with gzip.open(feed_dir / f"{name}.jsonl.gz", "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[httpx.Client]:
    """A key of this module's own, so its requests do not spend other modules' rate budget."""
    with service.client(service.new_key("reference-tests")) as client:
        yield client


@pytest.fixture(scope="module")
def feed(feed_dir: Path) -> dict[str, list[Record]]:
    return {name: read_feed(feed_dir, name) for name in ("series", "expansions", "products")}


@pytest.fixture(scope="module")
def listed(client: httpx.Client) -> dict[str, list[Record]]:
    """Every row of the three lists, one page each (they are small)."""
    rows: dict[str, list[Record]] = {}
    for name in ENDPOINTS:
        data = ok(client.get(f"/v1/{name}", params={"limit": 200}))
        assert data["next_cursor"] is None, f"/v1/{name} has more than 200 rows in the test feed"
        rows[name] = data["items"]
    return rows


def release_order(expansions: list[Record]) -> list[str]:
    return [
        e["id"] for e in sorted(expansions, key=lambda e: (e.get("release_date") or "9999-12-31", e["id"]))
    ]


def ids(rows: list[Record]) -> list[Any]:
    return [row["id"] for row in rows]


def first_page(client: httpx.Client, path: str, **params: Any) -> Record:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    body: Record = response.json()
    return body


# --- envelope and record shapes -------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_list_is_an_enveloped_page_of_records_without_score(client: httpx.Client, name: str) -> None:
    body = first_page(client, f"/v1/{name}", limit=200)
    assert set(body) == {"data", "error"} and body["error"] is None
    assert set(body["data"]) == {"items", "next_cursor"}
    Envelope[Page[ENDPOINTS[name]]].model_validate(body)
    assert body["data"]["items"], f"/v1/{name} is empty"
    assert all("score" not in item for item in body["data"]["items"]), "score without q"


def test_expansion_records_carry_the_feed_values(
    listed: dict[str, list[Record]], feed: dict[str, list[Record]]
):
    by_id = {e["id"]: e for e in feed["expansions"]}
    assert sorted(ids(listed["expansions"])) == sorted(by_id)
    for record in listed["expansions"]:
        source = by_id[record["id"]]
        for key in ("series_id", "release_date", "card_count_total", "card_count_official"):
            assert record[key] == source[key], (record["id"], key)
        assert record["legal_standard"] is bool(source["legal_standard"])
        assert record["legal_expanded"] is bool(source["legal_expanded"])
        if source.get("name"):
            assert record["name"] == source["name"]
        assert record["name"], record["id"]
        if record["logo"] is not None:
            assert set(record["logo"]) == {"low", "high"}
            assert all(url.startswith(("https://", "http://")) for url in record["logo"].values())
        assert record["symbol"] is None or record["symbol"].startswith(("https://", "http://"))
        palette = record["palette"]
        assert palette is None or (len(palette) <= 4 and all(COLOUR.fullmatch(c) for c in palette))


def test_expansions_are_in_release_date_then_id_order(
    listed: dict[str, list[Record]], feed: dict[str, list[Record]]
) -> None:
    assert ids(listed["expansions"]) == release_order(feed["expansions"])


def test_series_records_list_their_expansions_in_release_date_order(
    listed: dict[str, list[Record]], feed: dict[str, list[Record]]
) -> None:
    series_order = sorted(feed["series"], key=lambda s: (s.get("first_release_date") or "", s["id"]))
    assert ids(listed["series"]) == [s["id"] for s in series_order]
    expansion_rows = {e["id"]: e for e in listed["expansions"]}
    names = {s["id"]: s["name"] for s in feed["series"]}
    for record in listed["series"]:
        assert record["name"] == names[record["id"]]
        own = [e for e in feed["expansions"] if e["series_id"] == record["id"]]
        assert ids(record["expansions"]) == release_order(own), record["id"]
        # Each nested entry is the expansion record cut down to the spec's seven keys.
        for nested in record["expansions"]:
            assert set(nested) == set(SERIES_EXPANSION_KEYS)
            assert nested == {key: expansion_rows[nested["id"]][key] for key in SERIES_EXPANSION_KEYS}


def test_product_records_carry_the_feed_values_in_id_order(
    listed: dict[str, list[Record]], feed: dict[str, list[Record]]
) -> None:
    by_id = {p["id"]: p for p in feed["products"] if p["expansions"]}
    assert ids(listed["products"]) == sorted(by_id)
    for record in listed["products"]:
        source = by_id[record["id"]]
        assert record["name"] == source["name"]
        assert record["clean_name"] == source["clean_name"]
        assert record["number"] == source["number"]
        assert record["marketplace_url"] == source["marketplace_url"]
        assert record["expansions"] == [{"id": e["id"], "name": e["name"]} for e in source["expansions"]]
        assert isinstance(record["marketplace"], list)


@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_detail_read_serves_the_same_record_as_the_list(
    client: httpx.Client, listed: dict[str, list[Record]], name: str
) -> None:
    for row in listed[name]:
        response = client.get(f"/v1/{name}/{row['id']}")
        body = response.json()
        Envelope[ENDPOINTS[name]].model_validate(body)
        assert ok(response) == row
        assert "score" not in body["data"]


@pytest.mark.parametrize(
    "path", ["/v1/series/nope", "/v1/expansions/nope", "/v1/products/999999999", "/v1/products/x"]
)
def test_unknown_id_is_not_found(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    failed(response, 404, "not_found")
    ErrorEnvelope.model_validate(response.json())


@pytest.mark.parametrize("path", ["/v1/series", "/v1/expansions", "/v1/products", "/v1/expansions/base1"])
def test_reference_reads_need_a_key(service: Service, path: str) -> None:
    failed(httpx.get(service.base_url + path, timeout=30), 401, "unauthorized")


def test_series_record_logo_and_palette_are_never_null(listed: dict[str, list[Record]]) -> None:
    """Spec, Events > Records: a series record has `logo` ({low, high}) and `palette` (array of string);
    unlike the expansion record and the series' nested expansions, neither is marked "or null"."""
    for record in listed["series"]:
        logo, palette = record["logo"], record["palette"]
        assert isinstance(logo, dict) and set(logo) == {"low", "high"}, (
            f"series {record['id']}: logo {logo!r}"
        )
        assert isinstance(palette, list), f"series {record['id']}: palette {palette!r}"


def test_product_record_image_follows_the_feed(listed: dict[str, list[Record]], feed_dir: Path) -> None:
    """Spec, Events > Records: a product record has `image` (`low`, `high`). The upstream feed carries no
    product images (`image: null` on every record), and the service does not invent one: documented gap."""
    feed_images = {r["id"]: r["image"] for r in read_jsonl(feed_path(feed_dir, "products"))}
    for record in listed["products"]:
        image = record["image"]
        if feed_images[record["id"]] is None:
            assert image is None, f"product {record['id']}: image {image!r} invented"
        else:
            assert isinstance(image, dict) and set(image) == {"low", "high"}


# --- q: typo-tolerant search by name ---------------------------------------------------------------

TYPOS = [
    ("expansions", "Crystal Guardains", "ex14"),
    ("expansions", "Shinng Fates", "swsh4.5"),
    ("series", "Sword & Sheild", "swsh"),
    ("products", "Shining Fates Boster Box", 500342),
]


@pytest.mark.parametrize(("name", "q", "expected"), TYPOS)
def test_q_finds_a_misspelt_name_first_with_a_score(
    client: httpx.Client, name: str, q: str, expected: Any
) -> None:
    require_shared()
    body = first_page(client, f"/v1/{name}", q=q, limit=200)
    Envelope[Page[ENDPOINTS[name]]].model_validate(body)
    items = body["data"]["items"]
    assert items and items[0]["id"] == expected, [(i["id"], i["score"]) for i in items]
    assert all("score" in item and 0 <= item["score"] <= 1 for item in items)
    assert 0 < items[0]["score"] < 1, "a misspelling is not an exact match"
    keys = [(-item["score"], str(item["id"])) for item in items]
    assert keys == sorted(keys), "best match first, ties by id"


@pytest.mark.parametrize(
    ("name", "q", "expected"), [("expansions", "base set", "base1"), ("series", "EX", "ex")]
)
def test_q_exact_name_scores_one(client: httpx.Client, name: str, q: str, expected: str) -> None:
    require_shared()
    items = ok(client.get(f"/v1/{name}", params={"q": q}))["items"]
    assert items[0]["id"] == expected and items[0]["score"] == 1.0


def test_q_and_series_id_compose(client: httpx.Client) -> None:
    require_shared()
    everywhere = ok(client.get("/v1/expansions", params={"q": "Fates", "limit": 200}))["items"]
    assert {"swsh4.5", "sma"} <= set(ids(everywhere))  # Shining Fates, Hidden Fates Shiny Vault
    within = ok(client.get("/v1/expansions", params={"q": "Fates", "series_id": "sm", "limit": 200}))["items"]
    assert ids(within) == ["sma"]


def test_empty_q_is_a_bad_request(client: httpx.Client) -> None:
    failed(client.get("/v1/expansions", params={"q": ""}), 400, "bad_request")


# --- filters ---------------------------------------------------------------------------------------


def test_series_id_filter_on_expansions(client: httpx.Client, feed: dict[str, list[Record]]) -> None:
    for series in feed["series"]:
        own = [e for e in feed["expansions"] if e["series_id"] == series["id"]]
        rows = walk(client, "/v1/expansions", series_id=series["id"], limit=200)
        assert ids(rows) == release_order(own), series["id"]
    data = ok(client.get("/v1/expansions", params={"series_id": "no-such-series"}))
    assert data == {"items": [], "next_cursor": None}


def test_expansion_id_filter_on_products(client: httpx.Client, feed: dict[str, list[Record]]) -> None:
    checked = 0
    for expansion in feed["expansions"]:
        expected = sorted(
            p["id"] for p in feed["products"] if any(e["id"] == expansion["id"] for e in p["expansions"])
        )
        rows = walk(client, "/v1/products", expansion_id=expansion["id"], limit=200)
        assert ids(rows) == expected, expansion["id"]
        assert all(expansion["id"] in {e["id"] for e in row["expansions"]} for row in rows)
        checked += len(rows)
    assert checked > 0
    data = ok(client.get("/v1/products", params={"expansion_id": "no-such-expansion"}))
    assert data == {"items": [], "next_cursor": None}


# --- cursors ---------------------------------------------------------------------------------------

WALKS = [
    ("/v1/series", {}),
    ("/v1/expansions", {}),
    ("/v1/products", {}),
    ("/v1/products", {"q": "booster"}),
    ("/v1/expansions", {"q": "set"}),
]


@pytest.mark.parametrize(("path", "params"), WALKS)
def test_cursor_walk_at_limit_2_has_no_duplicates_or_gaps(
    client: httpx.Client, path: str, params: Record
) -> None:
    if params:
        require_shared()  # the queries are chosen to hit several rows of the real feed
    whole = ok(client.get(path, params={**params, "limit": 200}))
    assert whole["next_cursor"] is None
    # The real feed has more than two rows everywhere; the demo catalog only two series, so walk by one.
    size = 2 if len(whole["items"]) > 2 else 1
    assert len(whole["items"]) > size, "too few rows for a walk to prove anything"
    walked: list[Any] = []
    cursor = None
    for _ in range(200):
        query = {**params, "limit": size, **({"cursor": cursor} if cursor else {})}
        data = ok(client.get(path, params=query))
        assert 1 <= len(data["items"]) <= size
        walked.extend(ids(data["items"]))
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert walked == ids(whole["items"])
    assert len(walked) == len(set(walked))


def _tampered(cursor: str) -> str:
    middle = len(cursor) // 2
    return cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]


@pytest.mark.parametrize("name", list(ENDPOINTS))
def test_foreign_or_garbage_cursor_gives_the_first_page(client: httpx.Client, name: str) -> None:
    path = f"/v1/{name}"
    first = first_page(client, path, limit=1)
    own = first["data"]["next_cursor"]
    assert own is not None
    foreign = {
        other: first_page(client, f"/v1/{other}", limit=1)["data"]["next_cursor"]
        for other in ("cards", *ENDPOINTS)
        if other != name
    }
    # A cursor this endpoint issued, but for another query (q), is foreign too.
    searched = first_page(client, path, limit=1, q="a")["data"]["next_cursor"]
    candidates = [
        "garbage",
        "AAAA",
        "not base64 !!",
        "x" * 3000,
        _tampered(own),
        *(c for c in (*foreign.values(), searched) if c is not None),
    ]
    assert len(candidates) >= 7
    for cursor in candidates:
        assert first_page(client, path, limit=1, cursor=cursor) == first, cursor[:60]
    # ...while its own cursor moves on.
    assert first_page(client, path, limit=1, cursor=own)["data"]["items"] != first["data"]["items"]
