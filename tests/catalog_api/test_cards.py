"""`GET /v1/cards` rule by rule (spec, numbered rules 1-13), and `GET /v1/cards/{id}`."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from catalog_api.catalog.schemas import Card, CardSummary
from catalog_api.kit.schemas import Envelope, Page
from tests.catalog_api.helpers import failed, ok, walk
from tests.conftest import SHARED_CATALOG, Service, require_shared

SUMMARY_KEYS = {
    "id",
    "expansion_id",
    "number",
    "name",
    "rarity",
    "illustrator",
    "image",
    "palette",
    "category",
    "number_normalized",
}
METADATA_KEYS = set(Card.model_fields["metadata"].annotation.__args__[0].model_fields)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def catalog(service: Service) -> list[dict[str, Any]]:
    with service.client() as client:
        return walk(client, "/v1/cards", limit=200)


@pytest.fixture(scope="module")
def releases(service: Service) -> dict[str, str]:
    with service.client() as client:
        return {e["id"]: e["release_date"] for e in walk(client, "/v1/expansions", limit=200)}


def catalog_key(row: dict[str, Any], releases: dict[str, str]) -> tuple[Any, ...]:
    number = row["number"] or ""
    numeric = number.isdigit()
    return (
        releases[row["expansion_id"]],
        row["expansion_id"],
        not numeric,
        int(number) if numeric else 0,
        row["id"],
    )


def test_rule1_catalog_order_numbers_numeric_non_numeric_last(
    catalog: list[dict[str, Any]], releases: dict[str, str]
):
    assert len(catalog) >= 50
    assert [r["id"] for r in catalog] == [
        r["id"] for r in sorted(catalog, key=lambda r: catalog_key(r, releases))
    ]
    by_expansion: dict[str, list[str]] = {}
    for row in catalog:
        by_expansion.setdefault(row["expansion_id"], []).append(row["number"])
    mixed = [
        numbers
        for numbers in by_expansion.values()
        if any(n.isdigit() for n in numbers) and not all(n.isdigit() for n in numbers)
    ]
    assert mixed, "the loaded feed should have an expansion with numeric and non-numeric numbers"
    for numbers in mixed:
        first_non_numeric = next(i for i, n in enumerate(numbers) if not n.isdigit())
        assert all(not n.isdigit() for n in numbers[first_non_numeric:])
    for numbers in by_expansion.values():
        numeric = [int(n) for n in numbers if n.isdigit()]
        assert numeric == sorted(numeric), "numbers sort as integers: 2 before 10"
    assert any(len([n for n in numbers if n.isdigit()]) >= 10 for numbers in by_expansion.values())


@pytest.mark.parametrize("limit", [1, 7, 50])
def test_rule2_walk_has_no_duplicates_or_gaps(service: Service, catalog: list[dict[str, Any]], limit: int):
    with service.client() as client:
        if limit == 1:  # a full walk one row at a time is long; walk one expansion instead
            expansion = catalog[len(catalog) // 2]["expansion_id"]
            rows = walk(client, "/v1/cards", limit=1, expansion_id=expansion)
            expected = [r["id"] for r in catalog if r["expansion_id"] == expansion]
        else:
            rows = walk(client, "/v1/cards", limit=limit)
            expected = [r["id"] for r in catalog]
    assert [r["id"] for r in rows] == expected
    assert len(set(expected)) == len(expected)


def test_expansion_filter_and_unknown_expansion(service: Service, catalog: list[dict[str, Any]]):
    expansion = catalog[-1]["expansion_id"]
    with service.client() as client:
        rows = walk(client, "/v1/cards", expansion_id=expansion, limit=13)
        assert [r["id"] for r in rows] == [r["id"] for r in catalog if r["expansion_id"] == expansion]
        data = ok(client.get("/v1/cards", params={"expansion_id": "no-such-expansion"}))
    assert data == {"items": [], "next_cursor": None}


def test_rows_validate_against_the_contract(service: Service):
    with service.client() as client:
        for include in ("", "variants", "metadata", "variants,metadata,change"):
            body = client.get("/v1/cards", params={"limit": 200, "include": include}).json()
            Envelope[Page[CardSummary]].model_validate(body)
        Envelope[Page[CardSummary]].model_validate(
            client.get("/v1/cards", params={"q": "a", "limit": 200}).json()
        )


def test_rule3_search_ranks_best_first_with_scores(service: Service):
    require_shared()
    with service.client() as client:
        rows = ok(client.get("/v1/cards", params={"q": "Charizrd", "limit": 20}))["items"]
    assert rows and rows[0]["name"] == "Charizard"
    scores = [r["score"] for r in rows]
    assert all(0 <= s <= 1 for s in scores) and scores == sorted(scores, reverse=True)


def test_rule4_ties_at_the_top_order_by_id(service: Service):
    require_shared()
    with service.client() as client:
        rows = ok(client.get("/v1/cards", params={"q": "Charizard", "limit": 50}))["items"]
    top = [r for r in rows if r["score"] == rows[0]["score"]]
    assert len(top) >= 2, "base1 and base4 both print a Charizard"
    assert all(r["name"] == "Charizard" for r in top)
    assert [r["id"] for r in top] == sorted(r["id"] for r in top)
    for earlier, later in itertools.pairwise(rows):
        assert (-earlier["score"], earlier["id"]) < (-later["score"], later["id"])


def test_rule3_search_cursor_walk(service: Service):
    with service.client() as client:
        full = ok(client.get("/v1/cards", params={"q": "a", "limit": 200}))["items"]
        walked = walk(client, "/v1/cards", q="a", limit=9)
    assert len(walked) >= min(len(full), 20)
    assert [r["id"] for r in walked[: len(full)]] == [r["id"] for r in full]
    assert len({r["id"] for r in walked}) == len(walked)


def test_rule5_q_and_expansion_compose(service: Service):
    require_shared()
    with service.client() as client:
        rows = ok(client.get("/v1/cards", params={"q": "Charizard", "expansion_id": "base4"}))["items"]
        everywhere = ok(client.get("/v1/cards", params={"q": "Charizard"}))["items"]
    assert rows and all(r["expansion_id"] == "base4" for r in rows)
    assert rows[0]["id"] == "base4-4"
    assert {r["expansion_id"] for r in everywhere} > {"base4"}


def test_rule6_no_score_without_q(catalog: list[dict[str, Any]]):
    assert all(set(row) == SUMMARY_KEYS for row in catalog)


def test_rules7_to_10_includes(service: Service):
    with service.client() as client:
        plain = ok(client.get("/v1/cards", params={"limit": 200}))["items"]
        variants = ok(client.get("/v1/cards", params={"limit": 200, "include": "variants"}))["items"]
        metadata = ok(client.get("/v1/cards", params={"limit": 200, "include": "metadata"}))["items"]
        change = ok(client.get("/v1/cards", params={"limit": 200, "include": "change"}))["items"]
        junk = ok(client.get("/v1/cards", params={"limit": 200, "include": "nonsense,,prices"}))["items"]
    assert all(set(r) == SUMMARY_KEYS | {"variants"} for r in variants)
    assert all(isinstance(v["id"], int) and v["stamps"] is not None for r in variants for v in r["variants"])
    assert all(set(r) == SUMMARY_KEYS | {"metadata"} for r in metadata)
    assert all(r["metadata"] is None or set(r["metadata"]) == METADATA_KEYS for r in metadata)
    # No price history is loaded, so no card has a mover row and `change` stays absent (rule 9).
    assert all(set(r) == SUMMARY_KEYS for r in change)
    assert junk == plain


def test_rule7_card_without_printings_gets_empty_list(service: Service):
    with service.client() as client:
        rows = walk(client, "/v1/cards", limit=200, include="variants")
    empty = [r for r in rows if r["variants"] == []]
    assert empty, "the loaded feed has cards without printings (swshp upstream, embp-11 in the sample)"


def test_rule11_rows_are_summaries_and_full_rows_cover_the_detail(
    service: Service, catalog: list[dict[str, Any]]
):
    card_id = catalog[3]["id"]
    with service.client() as client:
        detail = ok(client.get(f"/v1/cards/{card_id}"))
        Envelope[Card].model_validate(client.get(f"/v1/cards/{card_id}").json())
        row = ok(
            client.get(
                "/v1/cards",
                params={"include": "variants,metadata", "expansion_id": catalog[3]["expansion_id"]},
            )
        )
    full = next(r for r in row["items"] if r["id"] == card_id)
    assert {"variants", "metadata"} <= set(detail) and "variants" not in catalog[3]
    assert set(full) == set(detail) | {"number_normalized"}
    assert {k: full[k] for k in detail} == detail


def test_rule12_strong_etag_and_304(service: Service):
    with service.client() as client:
        first = client.get("/v1/cards", params={"limit": 5})
        etag = first.headers["ETag"]
        assert re.fullmatch(r'"[^"]+"', etag), "a strong validator: quoted, no W/ prefix"
        again = client.get("/v1/cards", params={"limit": 5})
        assert again.headers["ETag"] == etag and again.content == first.content
        cached = client.get("/v1/cards", params={"limit": 5}, headers={"If-None-Match": etag})
        assert cached.status_code == 304 and cached.content == b""
        assert cached.headers["ETag"] == etag
        assert "RateLimit" in cached.headers and cached.headers["RateLimit-Policy"] == "300;w=60"
        listed = client.get("/v1/cards", params={"limit": 5}, headers={"If-None-Match": f'"other", {etag}'})
        assert listed.status_code == 304
        other = client.get("/v1/cards", params={"limit": 6}, headers={"If-None-Match": etag})
        assert other.status_code == 200 and other.headers["ETag"] != etag
        detail = client.get(f"/v1/cards/{first.json()['data']['items'][0]['id']}")
        assert client.get(detail.url, headers={"If-None-Match": detail.headers["ETag"]}).status_code == 304


@pytest.mark.parametrize(
    ("raw", "expected"), [("500", 200), ("200", 200), ("1", 1), ("abc", 50), ("", 50), ("0", 50), ("-3", 50)]
)
def test_limit_clamps_and_falls_back(
    service: Service, catalog: list[dict[str, Any]], raw: str, expected: int
):
    # The real subset holds ~1,000 cards; the bundled sample (no ../shared) holds 59, fewer than 200.
    with service.client() as client:
        data = ok(client.get("/v1/cards", params={"limit": raw}))
    assert len(data["items"]) == min(expected, len(catalog))
    assert (data["next_cursor"] is not None) == (expected < len(catalog))


def test_default_page_is_50(service: Service):
    with service.client() as client:
        assert len(ok(client.get("/v1/cards"))["items"]) == 50


def test_foreign_and_forged_cursors_return_the_first_page(service: Service, catalog: list[dict[str, Any]]):
    with service.client() as client:
        first = ok(client.get("/v1/cards", params={"limit": 10}))
        second = ok(client.get("/v1/cards", params={"limit": 10, "cursor": first["next_cursor"]}))
        assert second["items"][0]["id"] == catalog[10]["id"]
        cursor = first["next_cursor"]
        tampered = cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")
        expansion_cursor = ok(
            client.get("/v1/cards", params={"limit": 1, "expansion_id": catalog[0]["expansion_id"]})
        )["next_cursor"]
        search_cursor = ok(client.get("/v1/cards", params={"limit": 1, "q": "a"}))["next_cursor"]
        series_cursor = ok(client.get("/v1/series", params={"limit": 1}))["next_cursor"]
        for foreign in (
            "garbage",
            "",
            "%%%",
            tampered,
            expansion_cursor,
            search_cursor,
            series_cursor,
            "A" * 5000,
        ):
            page = ok(client.get("/v1/cards", params={"limit": 10, "cursor": foreign}))
            assert [r["id"] for r in page["items"]] == [r["id"] for r in catalog[:10]], foreign


def test_detail_and_404(service: Service, catalog: list[dict[str, Any]]):
    with service.client() as client:
        card = ok(client.get(f"/v1/cards/{catalog[0]['id']}"))
        assert card["id"] == catalog[0]["id"] and isinstance(card["variants"], list)
        failed(client.get("/v1/cards/no-such-card"), 404, "not_found")
        failed(client.get("/v1/cards/%2E%2E%2Fetc"), 404, "not_found")


def test_bad_q_is_400(service: Service):
    with service.client() as client:
        failed(client.get("/v1/cards", params={"q": ""}), 400, "bad_request")
        failed(client.get("/v1/cards", params={"q": "x" * 201}), 400, "bad_request")


# Search quality on real names: the intended card comes first despite a typo.
QUERIES = [
    ("Charizard", "Charizard"),
    ("charizard", "Charizard"),
    ("Charzard", "Charizard"),
    ("Chairzard", "Charizard"),
    ("Blastoise", "Blastoise"),
    ("Blastiose", "Blastoise"),
    ("Venusaur", "Venusaur"),
    ("Venusuar", "Venusaur"),
    ("Mewtwo", "Mewtwo"),
    ("Mewto", "Mewtwo"),
    ("Professor Oak", "Professor Oak"),
    ("Profesor Oak", "Professor Oak"),
    ("Gyarados", "Gyarados"),
    ("Gyardos", "Gyarados"),
    ("Pokemon Center", "Pokémon Center"),
    ("pokémon centre", "Pokémon Center"),
]


@pytest.mark.parametrize(("query", "name"), QUERIES)
def test_search_quality_on_real_names(service: Service, query: str, name: str):
    require_shared()
    with service.client() as client:
        rows = ok(client.get("/v1/cards", params={"q": query, "limit": 5}))["items"]
    assert rows and rows[0]["name"] == name, [(r["name"], r["score"]) for r in rows]


@pytest.mark.parametrize(
    ("query", "card_id"),
    [
        ("25", "base1-25"),
        ("025", "base1-25"),
        ("TG05", "swsh10tg-TG05"),
        ("tg5", "swsh10tg-TG05"),
        ("SV1", "sma-SV1"),
        ("SV001", "sma-SV1"),
        ("001", "miscp-001"),
    ],
)
def test_search_by_collector_number(service: Service, query: str, card_id: str):
    require_shared()
    with service.client() as client:
        rows = walk(client, "/v1/cards", q=query, limit=200)
    assert card_id in [r["id"] for r in rows if r["score"] == 1.0]


def test_shared_feed_is_what_was_loaded():
    require_shared()
    assert SHARED_CATALOG.is_dir()
