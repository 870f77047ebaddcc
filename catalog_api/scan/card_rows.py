"""The card rows the scanner's side reads: the fields a scan answer shows, and the print of every
imaged card that the scanner's index is built from (`catalog_api.scan.indexing` runs it on the blocking
engine). Both read a card beside its expansion, which is what the scanner matches on and shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.kit.models import Card, Expansion


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
