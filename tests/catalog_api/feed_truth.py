"""What the feed files themselves say a card list should hold: the expected answers of the filter, sort
and language tests, computed from the raw feed rows (never through the service's own code), following
the rules docs/catalog.md states."""

from __future__ import annotations

import gzip
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LANGUAGE_FALLBACK = ("fr", "de", "it", "es", "pt", "nl", "pl", "ja")


def read(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def served_name(record: dict[str, Any]) -> str:
    """The documented fallback: the English name, else the first other-language one, else the id."""
    names = record.get("names") or {}
    if record.get("name"):
        return str(record["name"])
    for language in ("en", *LANGUAGE_FALLBACK, *sorted(names)):
        if names.get(language):
            return str(names[language])
    return str(record["id"])


def name_key(name: str) -> str:
    """Documented `sort=name` key: case-folded, accents removed (NFKD), spaces collapsed."""
    decomposed = unicodedata.normalize("NFKD", name.casefold())
    return " ".join("".join(ch for ch in decomposed if not unicodedata.combining(ch)).split())


def printing_of(printing: dict[str, Any]) -> tuple[Any, ...]:
    return (
        printing.get("type") or "normal",
        printing.get("subtype"),
        printing.get("size"),
        tuple(sorted(printing.get("stamps") or [])),
        printing.get("foil"),
    )


@dataclass
class FeedCard:
    id: str
    expansion_id: str
    name: str
    names: dict[str, str]
    rarity: str | None
    category: str | None
    illustrator: str | None
    types: list[str]
    hp: float | None
    standard: bool
    expanded: bool
    release: str
    number: str | None
    printings: list[tuple[Any, ...]]
    price: int | None = None

    @property
    def catalog_key(self) -> tuple[Any, ...]:
        numeric = self.number is not None and self.number.isdigit()
        return (
            self.release,
            self.expansion_id,
            0 if numeric else 1,
            int(self.number) if numeric and self.number else 0,
            self.id,
        )


class FeedTruth:
    """The catalog and price feed folders, read once."""

    def __init__(self, catalog: Path, prices: Path) -> None:
        self.expansions = {e["id"]: e for e in read(catalog / "expansions.jsonl.gz")}
        self.series = {s["id"]: s for s in read(catalog / "series.jsonl.gz")}
        self.products = {p["id"]: p for p in read(catalog / "products.jsonl.gz")}
        self.cards: dict[str, FeedCard] = {}
        for record in read(catalog / "cards.jsonl.gz"):
            legality = record.get("legality") or {}
            rarity = record.get("rarity")
            printings = list(dict.fromkeys(printing_of(p) for p in record.get("variants") or []))
            expansion = self.expansions.get(record["expansion_id"], {})
            self.cards[record["id"]] = FeedCard(
                id=record["id"],
                expansion_id=record["expansion_id"],
                name=served_name(record),
                names={k: v for k, v in (record.get("names") or {}).items() if v},
                rarity=None if rarity in (None, "", "None") else rarity,
                category=record.get("category"),
                illustrator=record.get("illustrator"),
                types=list(record.get("types") or []),
                hp=record.get("hp"),
                standard=bool(legality.get("standard")),
                expanded=bool(legality.get("expanded")),
                release=expansion.get("release_date") or "9999-12-31",
                number=None if record.get("number") is None else str(record["number"]),
                printings=printings,
            )
        # The newest NM row of each printing, from the change log (days in order, later rows win).
        latest: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
        for day_file in sorted((prices / "marketplace").glob("*.ndjson.gz")):
            for row in read(day_file):
                if row["subject"] == "card" and row["condition"] == "NM":
                    key = (row["card_id"], printing_of(row["printing"]))
                    if key not in latest or latest[key]["observed_on"] <= row["observed_on"]:
                        latest[key] = row
        for card in self.cards.values():
            # Headline printing: the first printing, in feed order, whose current NM market is not null.
            for printing in card.printings:
                row = latest.get((card.id, printing))
                if row is not None and row["market"] is not None:
                    card.price = row["market"]
                    break

    def ids(self, keep: Any = None, sort: str = "catalog") -> list[str]:
        """Card ids the filter `keep` passes, in the documented order of `sort` (ties by id)."""
        chosen = [card for card in self.cards.values() if keep is None or keep(card)]
        chosen.sort(key=lambda c: c.id)
        if sort == "catalog":
            chosen.sort(key=lambda c: c.catalog_key)
        elif sort in ("name", "-name"):
            chosen.sort(key=lambda c: name_key(c.name), reverse=sort == "-name")
        elif sort in ("release", "-release"):
            chosen.sort(key=lambda c: c.release, reverse=sort == "-release")
        else:
            priced = sorted(
                (c for c in chosen if c.price is not None),
                key=lambda c: c.price or 0,
                reverse=sort == "-price",
            )
            chosen = priced + [c for c in chosen if c.price is None]
        return [card.id for card in chosen]
