"""A batch's answers as a file a shop's tools import: CSV in our own layout or in the marketplace
inventory layout, or NDJSON (`GET /v1/scan/batches/{id}/export`).

Identical answers are one row with a quantity: every photo answered with the same single card at the
same confidence tier, or the same race of cards. Only single answers (tier `certain` or `likely`) go to
the marketplace layout (a race or an unidentified photo would import a wrong card); our layout keeps
them too, after the single ones, marked by their outcome and tier `review`, for a person to look at.
Prices are the card's headline printing's current market in the batch's condition (NM unless asked), as
`GET /v1/cards` shows it.

A photo's name is the client's file name: a cell that a spreadsheet would run as a formula (starting
with `=`, `+`, `-`, `@`, tab or carriage return) is written with a leading `'`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from catalog_api.prices.price_reads import headline_printings

FORMATS = ("csv", "ndjson")
LAYOUTS = ("cardcat", "tcgplayer")
CARDCAT_COLUMNS = (
    "quantity", "tier", "outcome", "card_id", "name", "expansion", "number", "rarity", "printing",
    "condition", "market_cents", "other_matches", "photos",
)  # fmt: skip
# The marketplace's inventory import columns (#44 item 6): quantity, name, set, number, condition,
# printing, language, market price in dollars.
TCGPLAYER_COLUMNS = (
    "Quantity", "Name", "Set", "Card Number", "Condition", "Printing", "Language", "Market Price",
)  # fmt: skip
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Answers read a page at a time (a 5,000-photo batch's answers are a few MB).
READ_PAGE = 500


@dataclass
class ExportRow:
    """One distinct answer and how many photos gave it."""

    outcome: str
    tier: str
    matches: list[dict[str, Any]]
    photos: list[str] = field(default_factory=list)
    printing: str | None = None
    market_cents: int | None = None

    @property
    def card(self) -> dict[str, Any] | None:
        return self.matches[0]["card"] if self.matches else None


def aggregate(answers: list[dict[str, Any]]) -> list[ExportRow]:
    """Answers grouped by what they named: single matches first (by expansion and number), then races,
    then photos with no match (one row each, in the batch's order)."""
    rows: dict[tuple[str, ...], ExportRow] = {}
    for answer in sorted(answers, key=lambda item: item["index"]):
        matches = answer.get("matches") or []
        if answer.get("error"):
            outcome = "error"
        elif len(matches) == 1:
            outcome = "match"
        elif matches:
            outcome = "race"
        else:
            outcome = str((answer.get("unidentified") or {}).get("reason", "unidentified"))
        tier = (answer.get("analysis") or {}).get("tier", "review")  # an error's is `review` (worker._failed)
        ids = tuple(match["card"]["id"] for match in matches)
        key = (outcome, tier, *ids) if ids else (outcome, tier, f"#{answer['index']}")
        rows.setdefault(key, ExportRow(outcome, tier, matches)).photos.append(str(answer.get("name", "")))
    order = {"match": 0, "race": 1}
    tiers = {"certain": 0, "likely": 1}
    return sorted(
        rows.values(),
        key=lambda row: (
            order.get(row.outcome, 2),
            tiers.get(row.tier, 2),
            (row.card or {}).get("expansion", {}).get("id", ""),
            (row.card or {}).get("number") or "",
        ),
    )


async def priced_rows(conn: Any, answers: list[dict[str, Any]], condition: str) -> list[ExportRow]:
    rows = aggregate(answers)
    card_ids = [row.card["id"] for row in rows if row.card is not None]
    prices = await headline_printings(conn, card_ids, condition)
    for row in rows:
        if row.card is not None and row.card["id"] in prices:
            row.printing, row.market_cents = prices[row.card["id"]]
    return rows


def cardcat_record(row: ExportRow, condition: str) -> dict[str, Any]:
    card = row.card or {}
    return {
        "quantity": len(row.photos),
        "tier": row.tier,
        "outcome": row.outcome,
        "card_id": card.get("id"),
        "name": card.get("name"),
        "expansion": (card.get("expansion") or {}).get("name"),
        "number": card.get("number"),
        "rarity": card.get("rarity"),
        "printing": row.printing,
        "condition": condition if card else None,
        "market_cents": row.market_cents,
        "other_matches": [match["card"]["id"] for match in row.matches[1:]],
        "photos": row.photos,
    }


def _cell(value: Any) -> str:
    text = "" if value is None else " ".join(value) if isinstance(value, list) else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def csv_lines(rows: list[ExportRow], layout: str, condition: str, language: str) -> Iterator[str]:
    """The CSV, header first, a line at a time (RFC 4180 quoting, CRLF line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def line(values: list[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    if layout == "tcgplayer":
        yield line(list(TCGPLAYER_COLUMNS))
        for row in rows:
            card = row.card
            if row.outcome != "match" or card is None:
                continue
            price = "" if row.market_cents is None else f"{row.market_cents / 100:.2f}"
            yield line([
                len(row.photos), _cell(card["name"]), _cell(card["expansion"]["name"]), _cell(card["number"]),
                condition, _cell(row.printing), language, price,
            ])  # fmt: skip
        return
    yield line(list(CARDCAT_COLUMNS))
    for row in rows:
        record = cardcat_record(row, condition)
        record["photos"] = " | ".join(row.photos)
        yield line([_cell(record[column]) for column in CARDCAT_COLUMNS])


def ndjson_lines(rows: list[ExportRow], condition: str) -> Iterator[bytes]:
    for row in rows:
        yield orjson.dumps(cardcat_record(row, condition)) + b"\n"
