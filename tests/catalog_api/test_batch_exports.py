"""Batch exports as files (catalog_api.batches.exports, #44 item 6): identical answers as one row with
a quantity and a tier, the marketplace layout holding single answers only, RFC 4180 quoting that every
CSV reader parses back, and photo names that cannot run as spreadsheet formulas. The export of a real
batch through the server is in tests/serve_app/test_batches.py."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from catalog_api.batches import exports


def card(card_id: str, name: str = "Pikachu", number: str = "58") -> dict[str, Any]:
    return {
        "id": card_id,
        "name": name,
        "number": number,
        "rarity": "Common",
        "expansion": {"id": card_id.split("-")[0], "name": 'Base, "Set"'},
    }


def answer(
    index: int, name: str, *ids: str, reason: str = "print_unreadable", tier: str | None = None
) -> dict[str, Any]:
    matches = [{"score": 0.9, "card": card(card_id, f"Card {card_id}")} for card_id in ids]
    return {
        "analysis": {
            "game": "cardgame" if ids else None,
            "tier": tier or ("certain" if len(ids) == 1 else "review"),
        },
        "index": index,
        "name": name,
        "url": None,
        "matches": matches,
        "unidentified": None if ids else {"reason": reason, "message": "..."},
        "error": None,
    }


ANSWERS = [
    answer(0, "a.jpg", "base1-58"),
    answer(1, '=HYPERLINK("http://x")', "base1-58"),
    answer(2, "c.jpg", "base1-4", "base4-4"),
    answer(3, "d.jpg", "base1-4", "base4-4"),
    answer(4, "=1+1"),
    answer(5, 'f,\n"g".jpg', "swsh10tg-TG03"),
    {**answer(6, "h.jpg"), "unidentified": None, "error": {"code": "unsupported_image", "message": "x"}},
    answer(7, "i.jpg", "base1-58", tier="likely"),
]


def rows() -> list[exports.ExportRow]:
    found = exports.aggregate(ANSWERS)
    found[0].printing, found[0].market_cents = "holofoil", 1234
    return found


def test_identical_answers_are_one_row_with_a_quantity_sure_rows_first() -> None:
    found = exports.aggregate(ANSWERS)
    summary = [
        (row.outcome, row.tier, row.card["id"] if row.card else None, len(row.photos)) for row in found
    ]
    assert summary == [
        ("match", "certain", "base1-58", 2),
        ("match", "certain", "swsh10tg-TG03", 1),
        ("match", "likely", "base1-58", 1),  # the same card at another tier: a row of its own
        ("race", "review", "base1-4", 2),
        ("print_unreadable", "review", None, 1),
        ("error", "review", None, 1),
    ]


def parsed(text: str) -> list[list[str]]:
    assert text.endswith("\r\n")
    return list(csv.reader(io.StringIO(text, newline="")))


def test_the_cardcat_layout_keeps_every_photo_and_parses_back() -> None:
    table = parsed("".join(exports.csv_lines(rows(), "cardcat", "NM", "English")))
    assert tuple(table[0]) == exports.CARDCAT_COLUMNS
    records = [dict(zip(table[0], line, strict=True)) for line in table[1:]]
    assert sum(int(record["quantity"]) for record in records) == len(ANSWERS)
    first = records[0]
    assert (first["card_id"], first["market_cents"], first["printing"]) == ("base1-58", "1234", "holofoil")
    assert first["expansion"] == 'Base, "Set"'  # quoted, and read back whole
    assert first["photos"] == 'a.jpg | =HYPERLINK("http://x")'  # not a cell a spreadsheet runs
    assert first["tier"] == "certain" and records[2]["tier"] == "likely"
    assert records[4]["photos"] == "'=1+1"  # a cell that would be a formula is written as text
    race = records[3]
    assert race["outcome"] == "race" and race["tier"] == "review" and race["other_matches"] == "base4-4"
    assert records[1]["photos"] == 'f,\n"g".jpg'


def test_the_marketplace_layout_holds_only_sure_answers() -> None:
    table = parsed("".join(exports.csv_lines(rows(), "tcgplayer", "LP", "Japanese")))
    assert tuple(table[0]) == exports.TCGPLAYER_COLUMNS
    assert table[1] == ["2", "Card base1-58", 'Base, "Set"', "58", "LP", "holofoil", "Japanese", "12.34"]
    assert [line[1] for line in table[1:]] == ["Card base1-58", "Card swsh10tg-TG03", "Card base1-58"]
    assert table[2][-1] == ""  # no price known


def test_ndjson_lines_are_the_cardcat_records() -> None:
    lines = b"".join(exports.ndjson_lines(rows(), "NM")).decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [record["quantity"] for record in records] == [2, 1, 1, 2, 1, 1]
    assert records[0]["photos"] == ["a.jpg", '=HYPERLINK("http://x")'] and records[0]["market_cents"] == 1234
    assert records[4]["card_id"] is None and records[4]["outcome"] == "print_unreadable"
