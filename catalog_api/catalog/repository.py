"""All card SQL. Pages are keyset scans on the catalog-order indexes; variants come in one query a page.

Also the card queries of the other readers: the search index's rows (`readmodel`), the fields a scan
answer shows (`scan.scan_routes`), and the print of every imaged card that the scanner's index is built from
(`serve_app.indexing`, which runs it on the blocking engine)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, Row, Select, Text, cast, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.catalog import records
from catalog_api.kit.models import Card, CardMover, CardPriceCurrent, CardVariant, Expansion
from catalog_api.kit.pagination import PositionShape, sendable
from catalog_api.kit.vocabulary import CONDITION_ORDER
from catalog_api.prices.movers import WINDOWS

SUMMARY_COLUMNS = (
    Card.id,
    Card.expansion_id,
    Card.number,
    Card.name,
    Card.rarity,
    Card.illustrator,
    Card.image_key,
    Card.palette,
    Card.category,
    Card.number_normalized,
    Card.names,
)
# Position in catalog order: the whole catalog, or within one expansion.
GLOBAL_ORDER = (Card.sort_release, Card.expansion_id, Card.sort_nonnumeric, Card.sort_number, Card.id)
EXPANSION_ORDER = (Card.sort_nonnumeric, Card.sort_number, Card.id)
# What a cursor's position must hold for each order (the columns' own types), checked before any SQL.
GLOBAL_SHAPE: PositionShape = tuple(column.type.python_type for column in GLOBAL_ORDER)
EXPANSION_SHAPE: PositionShape = tuple(column.type.python_type for column in EXPANSION_ORDER)
MOVERS_SHAPE: PositionShape = (int,)


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


async def current_prices(
    conn: AsyncConnection, variant_ids: Sequence[int]
) -> dict[int, list[dict[str, Any]]]:
    """Each printing's current Price entries, NM first (the conditions' usual order)."""
    found: dict[int, list[Any]] = {}
    if not variant_ids:
        return {}
    stmt = select(*CardPriceCurrent.__table__.c).where(CardPriceCurrent.variant_id.in_(variant_ids))
    for row in (await conn.execute(stmt)).all():
        found.setdefault(row.variant_id, []).append(row)
    return {
        vid: [records.price_entry(row) for row in sorted(rows, key=_condition_rank)]
        for vid, rows in found.items()
    }


def _condition_rank(row: Any) -> tuple[int, str]:
    return CONDITION_ORDER.get(row.condition, len(CONDITION_ORDER)), row.condition


async def changes_for(conn: AsyncConnection, card_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each card's computed windows (1d, 7d, 30d order); cards without a mover row are absent."""
    if not card_ids:
        return {}
    stmt = select(*CardMover.__table__.c).where(CardMover.card_id.in_(card_ids))
    found: dict[str, list[Any]] = {}
    for row in (await conn.execute(stmt)).all():
        found.setdefault(row.card_id, []).append(row)
    order = list(WINDOWS)
    return {
        card_id: [records.change_entry(row) for row in sorted(rows, key=lambda r: order.index(r.window))]
        for card_id, rows in found.items()
    }


async def movers_page(
    conn: AsyncConnection,
    *,
    window: str,
    direction: str,
    expansion_id: str | None,
    min_cents: int,
    after: list[Any] | None,
    limit: int,
) -> tuple[list[str], list[Any] | None]:
    """Card ids of one leaderboard page (by the precomputed rank, after `after` of MOVERS_SHAPE), and the
    last rank if more remain."""
    if expansion_id is not None and not sendable(expansion_id):
        return [], None
    rank = CardMover.gain_rank if direction == "gainers" else CardMover.loss_rank
    stmt = select(CardMover.card_id, rank).where(CardMover.window == window, rank.is_not(None))
    if expansion_id is not None:
        stmt = stmt.where(CardMover.expansion_id == expansion_id)
    if min_cents > 0:
        stmt = stmt.where(CardMover.start_cents >= min_cents, CardMover.end_cents >= min_cents)
    if after is not None:
        stmt = stmt.where(rank > after[0])
    rows = (await conn.execute(stmt.order_by(rank).limit(limit + 1))).all()
    more = len(rows) > limit
    rows = rows[:limit]
    position = [rows[-1][1]] if more and rows else None
    return [row[0] for row in rows], position


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


async def headline_markets(conn: AsyncConnection) -> dict[str, int]:
    """card id -> its headline printing's current NM market, in cents: the first of its printings, in
    the feed's order, with a current non-null NM market (the same rule as `prices.movers.headlines`).
    Cards with no such printing are absent."""
    stmt = (
        select(CardVariant.card_id, CardPriceCurrent.market)
        .join(
            CardPriceCurrent,
            (CardPriceCurrent.variant_id == CardVariant.id) & (CardPriceCurrent.condition == "NM"),
        )
        .where(CardPriceCurrent.market.is_not(None))
        .order_by(CardVariant.card_id, CardVariant.position)
    )
    found: dict[str, int] = {}
    for card_id, market in (await conn.execute(stmt)).all():
        if market is not None:
            found.setdefault(card_id, market)
    return found


async def scan_card_rows(conn: AsyncConnection, ids: Sequence[str]) -> dict[str, Any]:
    """The fields a scan answer shows for each card id still in the catalog, by id."""
    columns = (Card.id, Card.name, Card.category, Card.rarity, Card.number, Card.image_key)
    stmt = _with_expansion(*columns, Expansion.id, Expansion.name, Card.names, Expansion.names)
    stmt = stmt.where(Card.id.in_(ids))
    return {row[0]: row for row in (await conn.execute(stmt)).all()}


def imaged_card_prints(conn: Connection) -> Sequence[Any]:
    """Each card with a face in the image store, with what its print shows (blocking: index builds)."""
    columns = (Card.id, Card.name, Card.number, Card.illustrator, Card.image_key)
    stmt = _with_expansion(*columns, Expansion.code, Expansion.card_count_official)
    return conn.execute(stmt.where(Card.image_key.is_not(None)).order_by(Card.id)).all()


def _with_expansion(*columns: Any) -> Select[Any]:
    """Card columns beside their expansion's."""
    return select(*columns).join(Expansion, Expansion.id == Card.expansion_id)
