"""Upstream catalog feed records -> the service's rows. Every quirk of the real feed is decided here.

Decisions (also in docs/catalog.md):
- A card (or expansion, or series) without an English name is served under the first name it has in
  another language (French in today's feed), else its id; nothing is dropped.
- Rarity "None" (a string upstream) means the source has no rarity: served as null.
- Collector numbers are served exactly as printed; `number_normalized` strips zero padding from digit runs
  and any `/total` suffix ("001/131" -> "1", "SV001" -> "SV1"); non-digit numbers sort after numeric ones.
- A printing listed twice on one card is kept once (first occurrence wins); the duplicate is counted.
- Ability kinds become snake_case tokens ("Ability" -> "ability", "Poke-POWER" -> "poke_power").
- An attack or ability printed without a name (some promos) gets "" (the contract's type is string).
- Weakness and resistance modifiers are folded to ASCII ("×2" -> "x2", "−20" -> "-20"); an empty one is null.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from core.cardtext import normalize_number

FEED_FILES = ("series", "expansions", "cards", "products")
NAME_LANGUAGE_FALLBACK = ("fr", "de", "it", "es", "pt", "nl", "pl", "ja")
ASCII_FOLD = str.maketrans({"×": "x", "−": "-", "＋": "+", "–": "-"})


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        for line in handle:
            if line.strip():
                yield orjson.loads(line)


def feed_path(directory: Path, name: str) -> Path:
    for candidate in (directory / f"{name}.jsonl.gz", directory / f"{name}.jsonl"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{directory} has no {name}.jsonl.gz")


def content_hash(record: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(record, option=orjson.OPT_SORT_KEYS)).hexdigest()


def card_name(record: dict[str, Any]) -> str:
    """The English name, else the first name in another language, else the id (cards, sets, series)."""
    names = record.get("names") or {}
    if record.get("name"):
        return str(record["name"])
    if names.get("en"):
        return str(names["en"])
    for language in (*NAME_LANGUAGE_FALLBACK, *sorted(names)):
        if names.get(language):
            return str(names[language])
    return str(record["id"])


def feed_names(record: dict[str, Any]) -> dict[str, str] | None:
    """The record's names in every language the feed carries (language -> name; empty ones dropped),
    or None when it carries none."""
    names = {str(k): str(v) for k, v in (record.get("names") or {}).items() if isinstance(v, str) and v}
    return names or None


def _ascii_modifier(value: Any) -> str | None:
    if value is None or str(value).strip() == "":
        return None
    return str(value).translate(ASCII_FOLD)


def _kind_token(kind: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(kind or "ability").lower()).strip("_")


def card_metadata(record: dict[str, Any]) -> dict[str, Any]:
    def effects(items: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if items is None:
            return None
        return [{"type": e.get("type"), "modifier": _ascii_modifier(e.get("modifier"))} for e in items]

    abilities = record.get("abilities")
    attacks = record.get("attacks")
    return {
        "hp": record.get("hp"),
        "types": record.get("types"),
        "dex_numbers": record.get("dex_numbers"),
        "stage": record.get("stage"),
        "evolve_from": record.get("evolve_from"),
        "description": record.get("description"),
        "effect": record.get("effect"),
        "trainer_type": record.get("trainer_type"),
        "energy_type": record.get("energy_type"),
        "retreat": record.get("retreat"),
        "abilities": None
        if abilities is None
        else [
            {"kind": _kind_token(a.get("kind")), "name": a.get("name") or "", "text": a.get("text")}
            for a in abilities
        ],
        "attacks": None
        if attacks is None
        else [
            {
                "name": a.get("name") or "",
                "cost": a.get("cost"),
                "damage": None if a.get("damage") is None else str(a["damage"]),
                "text": a.get("text"),
            }
            for a in attacks
        ],
        "weaknesses": effects(record.get("weaknesses")),
        "resistances": effects(record.get("resistances")),
        "legality": record.get("legality"),
    }


def printing_key(printing: dict[str, Any]) -> str:
    """The five fields that name a printing (the price feed uses the same five)."""
    stamps = sorted(printing.get("stamps") or [])
    fields = [
        printing.get("type"),
        printing.get("subtype"),
        printing.get("size"),
        stamps,
        printing.get("foil"),
    ]
    return json.dumps(fields, separators=(",", ":"))


def card_variants(record: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The card's printings, de-duplicated; returns them and how many duplicates were dropped."""
    seen: set[str] = set()
    variants: list[dict[str, Any]] = []
    for printing in record.get("variants") or []:
        key = printing_key(printing)
        if key in seen:
            continue
        seen.add(key)
        variants.append(
            {
                "printing_key": key,
                "type": printing.get("type") or "normal",
                "subtype": printing.get("subtype"),
                "size": printing.get("size"),
                "stamps": list(printing.get("stamps") or []),
                "foil": printing.get("foil"),
            }
        )
    return variants, len(record.get("variants") or []) - len(variants)


def card_row(record: dict[str, Any], release_date: str, image_key: str | None) -> dict[str, Any]:
    number = None if record.get("number") is None else str(record["number"])
    numeric = number is not None and number.isdigit()
    rarity = record.get("rarity")
    metadata = card_metadata(record)
    return {
        "id": str(record["id"]),
        "expansion_id": str(record["expansion_id"]),
        "number": number,
        "number_normalized": normalize_number(number),
        "name": card_name(record),
        "names": feed_names(record),
        "rarity": None if rarity in (None, "", "None") else str(rarity),
        "illustrator": record.get("illustrator"),
        "category": record.get("category"),
        "card_metadata": None if all(v is None for v in metadata.values()) else metadata,
        "image_key": image_key,
        "sort_release": release_date,
        "sort_nonnumeric": 0 if numeric else 1,
        "sort_number": int(number) if numeric and number is not None else 0,
    }


def expansion_row(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(record["id"]),
        "series_id": str(record["series_id"]),
        "name": card_name(record),
        "names": feed_names(record),
        "code": record.get("code"),
        "ptcgo_code": record.get("ptcgo_code"),
        "abbreviations": record.get("abbreviations"),
        "release_date": record.get("release_date") or "9999-12-31",
        "card_count_total": int(record.get("card_count_total") or 0),
        "card_count_official": int(record.get("card_count_official") or 0),
        "legal_standard": bool(record.get("legal_standard")),
        "legal_expanded": bool(record.get("legal_expanded")),
        "logo_url": record.get("logo_url"),
        "symbol_url": record.get("symbol_url"),
    }


def series_row(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(record["id"]),
        "name": card_name(record),
        "names": feed_names(record),
        "first_release_date": record.get("first_release_date"),
        "logo_url": record.get("logo_url"),
    }


def product_row(record: dict[str, Any]) -> dict[str, Any]:
    image = record.get("image")
    return {
        "id": int(record["id"]),
        "name": str(record.get("name") or record["id"]),
        "clean_name": str(record.get("clean_name") or record.get("name") or record["id"]),
        "number": record.get("number"),
        "image_url": image if isinstance(image, str) else None,
        "marketplace_url": str(record.get("marketplace_url") or ""),
        "expansions": [
            {"id": str(e["id"]), "name": str(e.get("name") or e["id"])}
            for e in record.get("expansions") or []
        ],
        "msrp_cents": record.get("msrp_cents"),
    }
