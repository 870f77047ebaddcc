"""The catalog's card SQL. Pages are keyset scans on the catalog-order indexes; variants come in one
query a page, their current prices from the prices room (`prices.price_reads`), which owns those tables
as the scan room owns the card rows a scan reads (`scan.card_rows`). Also the search index's rows
(`readmodel`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Row, Text, cast, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.kit import records
from catalog_api.kit.models import Card, CardVariant
from catalog_api.kit.pagination import PositionShape, sendable
from catalog_api.kit.records import SUMMARY_COLUMNS
from catalog_api.prices.price_reads import current_prices

# Position in catalog order: the whole catalog, or within one expansion.
GLOBAL_ORDER = (Card.sort_release, Card.expansion_id, Card.sort_nonnumeric, Card.sort_number, Card.id)
EXPANSION_ORDER = (Card.sort_nonnumeric, Card.sort_number, Card.id)
# What a cursor's position must hold for each order (the columns' own types), checked before any SQL.
GLOBAL_SHAPE: PositionShape = tuple(column.type.python_type for column in GLOBAL_ORDER)
EXPANSION_SHAPE: PositionShape = tuple(column.type.python_type for column in EXPANSION_ORDER)


# Metadata is read as JSON text and spliced into the response unparsed (orjson.Fragment): a 200-row page
# would otherwise parse and re-serialise every card's metadata bag.
METADATA_TEXT = cast(Card.card_metadata, Text).label("card_metadata")


def _columns(with_metadata: bool) -> tuple[Any, ...]:
    return (*SUMMARY_COLUMNS, METADATA_TEXT) if with_metadata else SUMMARY_COLUMNS


def metadata_json(text: str | None) -> orjson.Fragment | None:
    return None if text is None or text == "null" else orjson.Fragment(text)


async def catalog_page(
    conn: AsyncConnection,
    *,
    expansion_id: str | None,
    after: list[Any] | None,
    limit: int,
    with_metadata: bool,
) -> tuple[Sequence[Row[Any]], list[Any] | None]:
    """Up to `limit` cards after position `after` (of GLOBAL_SHAPE, or EXPANSION_SHAPE within one
    expansion), and the position of the last one if more remain."""
    if expansion_id is not None and not sendable(expansion_id):
        return [], None
    order = EXPANSION_ORDER if expansion_id is not None else GLOBAL_ORDER
    sort_only = (Card.sort_release, Card.sort_nonnumeric, Card.sort_number)
    stmt = select(*_columns(with_metadata), *sort_only).order_by(*order).limit(limit + 1)
    if expansion_id is not None:
        stmt = stmt.where(Card.expansion_id == expansion_id)
    if after is not None:
        stmt = stmt.where(tuple_(*order) > tuple_(*after))
    rows: Sequence[Row[Any]] = list((await conn.execute(stmt)).all())  # type: ignore[arg-type]
    more = len(rows) > limit
    rows = rows[:limit]
    position = [getattr(rows[-1], column.key) for column in order] if more and rows else None
    return rows, position


async def cards_by_ids(conn: AsyncConnection, ids: Sequence[str], with_metadata: bool) -> list[Row[Any]]:
    """Rows for these ids, in the order given."""
    if not ids:
        return []
    rows = (await conn.execute(select(*_columns(with_metadata)).where(Card.id.in_(ids)))).all()
    by_id = {row.id: row for row in rows}
    return [by_id[card_id] for card_id in ids if card_id in by_id]


async def card_detail_row(conn: AsyncConnection, card_id: str) -> Row[Any] | None:
    if not sendable(card_id):
        return None
    return (await conn.execute(select(*_columns(True)).where(Card.id == card_id))).first()


async def full_cards(conn: AsyncConnection, rows: Sequence[Any], public_url: str) -> list[dict[str, Any]]:
    """The full card object of each row (rows of `card_detail_row`'s columns, metadata included): what
    `GET /v1/cards/{id}` serves and what the cards bulk file holds, built by this one function."""
    variants = await variants_for(conn, [row.id for row in rows])
    return [
        records.card_detail(row, variants[row.id], public_url, metadata_json(row.card_metadata))
        for row in rows
    ]


async def variants_for(conn: AsyncConnection, card_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each card's printings in feed order; every id asked for is present (possibly with [])."""
    found: dict[str, list[dict[str, Any]]] = {card_id: [] for card_id in card_ids}
    if not card_ids:
        return found
    stmt = (
        select(*CardVariant.__table__.c)
        .where(CardVariant.card_id.in_(card_ids))
        .order_by(CardVariant.card_id, CardVariant.position)
    )
    variant_rows = (await conn.execute(stmt)).all()
    prices = await current_prices(conn, [row.id for row in variant_rows])
    for row in variant_rows:
        found[row.card_id].append(records.variant_record(row, prices.get(row.id)))
    return found


async def card_fact_rows(conn: AsyncConnection) -> Sequence[Any]:
    """Every card's searchable, filterable and sortable fields (what the read model holds); `metadata`
    as JSON text (orjson parses it several times faster than the driver's json)."""
    columns = (
        Card.id,
        Card.expansion_id,
        Card.name,
        Card.names,
        Card.number,
        Card.rarity,
        Card.illustrator,
        Card.category,
        METADATA_TEXT,
        Card.sort_release,
        Card.sort_nonnumeric,
        Card.sort_number,
    )
    return (await conn.execute(select(*columns))).all()
