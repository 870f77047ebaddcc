"""The price tables as other rooms read them: a printing's current prices, a card's movers, one page of
the movers leaderboard and each card's headline market. The prices room owns these tables, so their SQL
lives here; the catalog's card answers, its read model and the movers route call it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.kit import records
from catalog_api.kit.models import CardPriceCurrent, CardVariant
from catalog_api.kit.pagination import PositionShape, sendable
from catalog_api.prices.movers import WINDOWS
from catalog_api.prices.tables import CardMover
from core.vocabulary import CONDITION_ORDER

# What a movers cursor's position holds: the precomputed rank.
MOVERS_SHAPE: PositionShape = (int,)


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


async def headline_printings(
    conn: AsyncConnection, card_ids: Sequence[str], condition: str = "NM"
) -> dict[str, tuple[str, int]]:
    """card id -> (printing type, current market in cents in `condition`) of its headline printing for
    that condition: the first of its printings, in the feed's order, with a current non-null market in
    it (for NM, the same printing `headline_markets` reads). Cards with no such printing are absent."""
    if not card_ids:
        return {}
    stmt = (
        select(CardVariant.card_id, CardVariant.type, CardPriceCurrent.market)
        .join(
            CardPriceCurrent,
            (CardPriceCurrent.variant_id == CardVariant.id) & (CardPriceCurrent.condition == condition),
        )
        .where(CardVariant.card_id.in_(list(card_ids)), CardPriceCurrent.market.is_not(None))
        .order_by(CardVariant.card_id, CardVariant.position)
    )
    found: dict[str, tuple[str, int]] = {}
    for card_id, printing, market in (await conn.execute(stmt)).all():
        if market is not None:
            found.setdefault(card_id, (printing, market))
    return found
