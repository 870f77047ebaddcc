"""The synthetic demo catalog must be deterministic and as untidy as the real feed it stands in for."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from catalog_api.ingest.demo_catalog import write_demo_catalog

Record = dict[str, Any]
FILES = ("series", "expansions", "cards", "products")
REAL_CATALOG = Path(__file__).resolve().parents[2].parent / "shared" / "catalog"
# Nested record lists whose items have a fixed key set in the real feed.
NESTED = ("abilities", "attacks", "weaknesses", "resistances")
PRINTING_KEYS = {"type", "subtype", "size", "stamps", "foil"}


def read_feed(folder: Path) -> dict[str, list[Record]]:
    return {
        name: [json.loads(line) for line in gzip.open(folder / f"{name}.jsonl.gz", "rt", encoding="utf-8")]
        for name in FILES
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Record]]:
    return read_feed(write_demo_catalog(tmp_path_factory.mktemp("demo")))


@pytest.fixture(scope="module")
def real() -> dict[str, list[Record]]:
    if not REAL_CATALOG.is_dir():
        pytest.skip("../shared/catalog not present")
    return read_feed(REAL_CATALOG)


def printing_key(variant: Record) -> tuple[Any, ...]:
    return (variant["type"], variant["subtype"], variant["size"], tuple(variant["stamps"]), variant["foil"])


def test_byte_identical_across_runs(tmp_path: Path) -> None:
    first = write_demo_catalog(tmp_path / "a")
    second = write_demo_catalog(tmp_path / "b" / "nested")  # also checks the folder is created
    for name in FILES:
        assert (first / f"{name}.jsonl.gz").read_bytes() == (second / f"{name}.jsonl.gz").read_bytes()


def test_sizes(demo: dict[str, list[Record]]) -> None:
    assert len(demo["series"]) == 2
    assert len(demo["expansions"]) == 3
    assert 50 <= len(demo["cards"]) <= 70
    assert len(demo["products"]) == 6
    assert [e["code"] for e in demo["expansions"]].count(None) == 1


def test_ids_unique_and_built_from_number(demo: dict[str, list[Record]]) -> None:
    for name in FILES:
        ids = [r["id"] for r in demo[name]]
        assert len(ids) == len(set(ids)), name
    for card in demo["cards"]:
        assert card["id"] == f"{card['expansion_id']}-{card['number']}"


def test_references_resolve(demo: dict[str, list[Record]]) -> None:
    series = {s["id"] for s in demo["series"]}
    expansions = {e["id"]: e for e in demo["expansions"]}
    assert all(e["series_id"] in series for e in expansions.values())
    for card in demo["cards"]:
        assert card["expansion_id"] in expansions
        assert card["series_id"] == expansions[card["expansion_id"]]["series_id"]
    for product in demo["products"]:
        for ref in product["expansions"]:
            assert ref["name"] == expansions[ref["id"]]["name"]


def test_expansion_counts_match_cards(demo: dict[str, list[Record]]) -> None:
    by_expansion = Counter(c["expansion_id"] for c in demo["cards"])
    for exp in demo["expansions"]:
        assert exp["card_count_total"] == max(exp["card_count_official"], by_expansion[exp["id"]])
        counted = [
            c for c in demo["cards"] if c["expansion_id"] == exp["id"] and c["energy_type"] != "Normal"
        ]
        assert exp["standard_legal_cards"] == sum(c["legality"]["standard"] for c in counted)
        assert exp["legal_standard"] == (exp["standard_legal_cards"] > 0)


def test_cards_without_english_name(demo: dict[str, list[Record]]) -> None:
    nameless = [c for c in demo["cards"] if c["name"] is None]
    assert len(nameless) == 2
    assert all(list(c["names"]) == ["fr"] for c in nameless)


def test_rarity_string_none(demo: dict[str, list[Record]]) -> None:
    assert sum(c["rarity"] == "None" for c in demo["cards"]) == 3
    assert all(c["rarity"] is not None for c in demo["cards"])


def test_collector_numbers(demo: dict[str, list[Record]]) -> None:
    numbers = {c["number"] for c in demo["cards"]}
    assert {"TG05", "SV001", "RC12", "77a", "A", "!", "001", "025"} <= numbers


def test_numeric_order_differs_from_text_order(demo: dict[str, list[Record]]) -> None:
    """At least one expansion has plain numbers past 10, so sorting them as text ("10" < "2") is wrong."""
    plain: dict[str, list[str]] = defaultdict(list)
    for card in demo["cards"]:
        if card["number"].isdigit() and not card["number"].startswith("0"):
            plain[card["expansion_id"]].append(card["number"])
    assert any(sorted(ns) != sorted(ns, key=int) for ns in plain.values())


def test_variant_quirks(demo: dict[str, list[Record]]) -> None:
    cards = demo["cards"]
    assert any(c["variants"] == [] for c in cards)
    duplicated = [c for c in cards if len({printing_key(v) for v in c["variants"]}) < len(c["variants"])]
    assert len(duplicated) == 1
    assert {c["variants_source"] for c in cards} == {"detailed", "flags", "absent"}
    for card in cards:
        assert all(set(v) >= PRINTING_KEYS for v in card["variants"])


def test_printings_follow_variants(demo: dict[str, list[Record]]) -> None:
    for card in demo["cards"]:
        types = {v["type"] for v in card["variants"]}
        stamps = {s for v in card["variants"] for s in v["stamps"]}
        assert card["printings"] == {
            "normal": "normal" in types,
            "holo": "holo" in types,
            "reverse": "reverse" in types,
            "first_edition": "1st-edition" in stamps,
            "w_promo": "w-promo" in stamps,
        }


def test_missing_illustrators(demo: dict[str, list[Record]]) -> None:
    assert sum(c["illustrator"] is None for c in demo["cards"]) >= 2


def test_categories(demo: dict[str, list[Record]]) -> None:
    cards = demo["cards"]
    assert {c["category"] for c in cards} == {"Pokemon", "Trainer", "Energy"}
    for card in cards:
        if card["category"] == "Pokemon":
            assert isinstance(card["hp"], int) and card["types"] and card["attacks"]
        else:
            assert card["hp"] is None and card["types"] is None and card["dex_numbers"] is None
            assert card["retreat"] is None and card["attacks"] == [] and card["weaknesses"] == []
    assert any(c["trainer_type"] for c in cards if c["category"] == "Trainer")
    assert {c["energy_type"] for c in cards if c["category"] == "Energy"} == {"Normal", "Special"}


def test_metadata_quirks(demo: dict[str, list[Record]]) -> None:
    cards = demo["cards"]
    assert "×2" in {w["modifier"] for c in cards for w in c["weaknesses"]}
    assert "-30" in {r["modifier"] for c in cards for r in c["resistances"]}
    damages = {a["damage"] for c in cards for a in c["attacks"]}
    assert {"20×", "30+", None} <= damages
    assert {"Ability", "Poke-POWER"} <= {a["kind"] for c in cards for a in c["abilities"]}


def test_reprints_share_name_and_illustrator(demo: dict[str, list[Record]]) -> None:
    expansions_by_art: dict[tuple[str, str], set[str]] = defaultdict(set)
    for card in demo["cards"]:
        if card["name"] and card["illustrator"]:
            expansions_by_art[(card["name"], card["illustrator"])].add(card["expansion_id"])
    assert sum(len(exps) >= 2 for exps in expansions_by_art.values()) >= 2


def test_popular_name(demo: dict[str, list[Record]]) -> None:
    expansions_by_name: dict[str, set[str]] = defaultdict(set)
    counts = Counter(c["name"] for c in demo["cards"] if c["name"])
    for card in demo["cards"]:
        expansions_by_name[card["name"]].add(card["expansion_id"])
    assert any(n >= 4 and len(expansions_by_name[name]) >= 2 for name, n in counts.items())


def test_products(demo: dict[str, list[Record]]) -> None:
    products = demo["products"]
    assert [p["id"] for p in products] == list(range(900001, 900001 + len(products)))
    for product in products:
        assert product["image"] is None
        assert product["marketplace_url"] == f"https://marketplace.example/p/{product['id']}"
        assert isinstance(product["msrp_cents"], int) and product["msrp_cents"] > 0
        assert product["number"] is None or isinstance(product["number"], str)
        assert product["expansions"] and all(set(ref) == {"id", "name"} for ref in product["expansions"])


def test_field_sets_match_real_feed(demo: dict[str, list[Record]], real: dict[str, list[Record]]) -> None:
    for name in FILES:
        assert {frozenset(r) for r in demo[name]} == {frozenset(r) for r in real[name]}, name
    for field in NESTED:
        real_keys = {frozenset(x) for c in real["cards"] for x in c[field]}
        assert {frozenset(x) for c in demo["cards"] for x in c[field]} <= real_keys, field
    for field in ("legality", "printings"):
        assert {frozenset(c[field]) for c in demo["cards"]} == {frozenset(c[field]) for c in real["cards"]}
    real_variant_keys = {k for c in real["cards"] for v in c["variants"] for k in v}
    assert {k for c in demo["cards"] for v in c["variants"] for k in v} <= real_variant_keys


def test_field_types_match_real_feed(demo: dict[str, list[Record]], real: dict[str, list[Record]]) -> None:
    """Every demo value has a JSON type the real feed also uses for that field (product `number` may be a
    string: upstream sends null today, but the format allows a printed number)."""
    for name in FILES:
        real_types: dict[str, set[str]] = defaultdict(set)
        for record in real[name]:
            for key, value in record.items():
                real_types[key].add(type(value).__name__)
        if name == "products":
            real_types["number"].add("str")
        for record in demo[name]:
            for key, value in record.items():
                assert type(value).__name__ in real_types[key], (name, record["id"], key)
