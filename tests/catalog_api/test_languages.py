"""Names in every language the feed carries: search in any language, `lang`, `include=names`, on PostgreSQL
and SQLite through the real server. Expected names are read from the feed files (feed_truth.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import Service
from tests.catalog_api.feed_truth import read, served_name
from tests.catalog_api.helpers import failed, ok, walk

LANGUAGES = ("en", "fr", "de", "it", "pt", "es", "es-mx")


@pytest.fixture
def client(service: Service) -> Any:
    with service.client() as c:
        yield c


@pytest.fixture(scope="module")
def feed(feed_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    kinds = ("cards", "expansions", "series", "products")
    return {kind: {str(r["id"]): r for r in read(feed_dir / f"{kind}.jsonl.gz")} for kind in kinds}


def in_language(record: dict[str, Any], lang: str) -> str:
    """The documented rule: the record's name in `lang` where the feed has one, its usual name otherwise."""
    return (record.get("names") or {}).get(lang) or served_name(record)


def feed_names(record: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (record.get("names") or {}).items() if v}


def test_other_language_names_find_charizard_first(client: httpx.Client, feed: dict[str, Any]) -> None:
    cards = feed["cards"]
    # Charizard cards: those whose English name is Charizard's (`Charizard`, `Charizard δ`, ...).
    charizards = {cid for cid, c in cards.items() if served_name(c).startswith("Charizard")}
    if not any((cards[cid].get("names") or {}).get("de") == "Glurak" for cid in charizards):
        pytest.skip("the feed here has no Charizard named in German (the sample catalog)")
    for query in ("Glurak", "Dracaufeu", "Glurk", "glurak", "DRACAUFEU"):
        rows = ok(client.get("/v1/cards", params={"q": query, "limit": 10}))["items"]
        assert rows[0]["id"] in charizards, (query, rows[:3])
        top = [row for row in rows if row["score"] == rows[0]["score"]]
        assert {row["id"] for row in top} <= charizards, (query, top)
    exact = walk(client, "/v1/cards", q="Glurak", limit=200)
    named = {
        cid
        for cid, c in cards.items()
        if any(n.casefold() == "glurak" for n in [served_name(c), *(c.get("names") or {}).values()])
    }
    assert {row["id"] for row in exact if row["score"] == 1.0} == named


@pytest.mark.parametrize("lang", ["fr", "de", "it", "es"])
def test_a_card_is_found_by_its_name_in_each_language(
    client: httpx.Client, feed: dict[str, Any], lang: str
) -> None:
    cards = feed["cards"]
    # A name in this language that is no card's usual name (so only the other-language index finds it).
    english = {served_name(c).casefold() for c in cards.values()}
    candidates = sorted(
        (name, cid)
        for cid, c in cards.items()
        if (name := (c.get("names") or {}).get(lang)) and name.casefold() not in english
    )
    if not candidates:
        pytest.skip(f"no card here has a {lang} name of its own")
    name, card_id = candidates[len(candidates) // 2]
    rows = walk(client, "/v1/cards", q=name, limit=200)
    owners = {cid for cid, c in cards.items() if name in (c.get("names") or {}).values()}
    assert card_id in {row["id"] for row in rows if row["score"] == 1.0}
    assert {row["id"] for row in rows if row["score"] == 1.0} <= owners | {
        cid for cid, c in cards.items() if served_name(c).casefold() == name.casefold()
    }


@pytest.mark.parametrize("lang", LANGUAGES)
def test_lang_serves_each_cards_name_in_that_language(
    client: httpx.Client, feed: dict[str, Any], lang: str
) -> None:
    cards = feed["cards"]
    rows = walk(client, "/v1/cards", lang=lang, include="names", limit=200)
    assert {row["id"] for row in rows} == set(cards)
    changed = 0
    for row in rows:
        record = cards[row["id"]]
        assert row["name"] == in_language(record, lang), row["id"]
        assert row["names"] == feed_names(record)
        changed += row["name"] != served_name(record)
    if lang in ("fr", "de"):
        assert changed > 0, "some card must have a name of its own in French and German"
    some = rows[len(rows) // 2]["id"]
    detail = ok(client.get(f"/v1/cards/{some}", params={"lang": lang, "include": "names"}))
    assert detail["name"] == in_language(cards[some], lang)
    assert detail["names"] == feed_names(cards[some])


def test_without_lang_or_include_nothing_changes(client: httpx.Client, feed: dict[str, Any]) -> None:
    rows = ok(client.get("/v1/cards", params={"limit": 100}))["items"]
    for row in rows:
        assert "names" not in row
        assert row["name"] == served_name(feed["cards"][row["id"]])
    series = ok(client.get("/v1/series"))["items"]
    assert all("names" not in s for s in series)


@pytest.mark.parametrize("lang", ["fr", "de"])
def test_reference_tables_in_a_language(client: httpx.Client, feed: dict[str, Any], lang: str) -> None:
    expansions, series = feed["expansions"], feed["series"]
    for row in walk(client, "/v1/expansions", lang=lang, include="names"):
        assert row["name"] == in_language(expansions[row["id"]], lang)
        assert row["names"] == feed_names(expansions[row["id"]])
    for row in walk(client, "/v1/series", lang=lang, include="names"):
        assert row["name"] == in_language(series[row["id"]], lang)
        assert row["names"] == feed_names(series[row["id"]])
        for nested in row["expansions"]:
            assert nested["name"] == in_language(expansions[nested["id"]], lang)
    for row in walk(client, "/v1/products", lang=lang, include="names"):
        assert row["name"] == served_name(feed["products"][str(row["id"])])  # English only in the feed
        assert row["names"] == {}
        for nested in row["expansions"]:
            if nested["id"] in expansions:
                assert nested["name"] == in_language(expansions[nested["id"]], lang)
    some = sorted(expansions)[0]
    assert ok(client.get(f"/v1/expansions/{some}", params={"lang": lang}))["name"] == in_language(
        expansions[some], lang
    )
    some = sorted(series)[0]
    assert ok(client.get(f"/v1/series/{some}", params={"lang": lang}))["name"] == in_language(
        series[some], lang
    )


def test_expansions_and_series_are_searched_in_every_language(
    client: httpx.Client, feed: dict[str, Any]
) -> None:
    for kind in ("expansions", "series"):
        records = feed[kind]
        english = {served_name(r).casefold() for r in records.values()}
        found = sorted(
            (name, rid)
            for rid, r in records.items()
            for lang, name in (r.get("names") or {}).items()
            if lang in ("de", "fr") and name and name.casefold() not in english
        )
        assert found, f"the feed here names no {kind} in German or French"
        name, record_id = found[0]
        rows = ok(client.get(f"/v1/{kind}", params={"q": name}))["items"]
        assert rows[0]["score"] == 1.0
        assert record_id in {row["id"] for row in rows if row["score"] == 1.0}


def test_unknown_lang_is_a_bad_request_on_every_read(client: httpx.Client, feed: dict[str, Any]) -> None:
    card = sorted(feed["cards"])[0]
    for path in (
        "/v1/cards",
        f"/v1/cards/{card}",
        "/v1/series",
        f"/v1/series/{sorted(feed['series'])[0]}",
        "/v1/expansions",
        f"/v1/expansions/{sorted(feed['expansions'])[0]}",
        "/v1/products",
        f"/v1/products/{sorted(feed['products'])[0]}",
        "/v1/movers",
    ):
        for bad in ("xx", "EN", "es_mx", ""):
            failed(client.get(path, params={"lang": bad}), 400, "bad_request")
    failed(client.post("/v1/scan", params={"lang": "xx"}, files={"image": b"x"}), 400, "bad_request")
