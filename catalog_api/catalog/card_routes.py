"""`GET /v1/cards` and `GET /v1/cards/{id}`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from catalog_api.catalog import records, repository
from catalog_api.catalog.schemas import Card, CardSummary
from catalog_api.catalog.search import SORT_KEY_SHAPE, search_page
from catalog_api.deps import AppContext, Context, cached_read
from catalog_api.kit.envelope import page
from catalog_api.kit.errors import NotFound
from catalog_api.kit.pagination import parse_limit
from catalog_api.kit.params import Cursor, Limit, Search
from catalog_api.kit.schemas import BY_ID, ERRORS, NOT_FOUND, Envelope, Page

router = APIRouter(prefix="/v1/cards", tags=["cards"])
INCLUDES = ("variants", "metadata", "change")


def parse_include(raw: str | None) -> set[str]:
    """Comma-separated extras; unknown values are dropped, not rejected."""
    return {part.strip() for part in (raw or "").split(",")} & set(INCLUDES)


@router.get("", response_model=Envelope[Page[CardSummary]], responses=ERRORS)
async def list_cards(
    request: Request,
    context: Context,
    limit: Limit = None,
    cursor: Cursor = None,
    expansion_id: Annotated[str | None, Query(description="Only this expansion's cards.")] = None,
    q: Search = None,
    include: Annotated[str | None, Query(description="Comma-separated: variants, metadata, change.")] = None,
) -> Response:
    """Cards in catalog order (expansion by release date, collector number numerically with non-numeric
    numbers last, then id), or best match first with `q`."""

    async def produce() -> dict[str, Any]:
        return await _card_page(context, limit, cursor, expansion_id, q, include)

    return await cached_read(request, context, produce)


async def _card_page(
    context: AppContext,
    limit: str | None,
    cursor: str | None,
    expansion_id: str | None,
    q: str | None,
    include: str | None,
) -> dict[str, Any]:
    size = parse_limit(limit)
    extras = parse_include(include)
    scope = ["cards", expansion_id, q]
    with_metadata = "metadata" in extras
    scores: list[float] | None = None
    rows: Sequence[Any] = []
    variants: dict[str, list[dict[str, Any]]] = {}
    changes: dict[str, list[dict[str, Any]]] = {}
    if q is None:
        shape = repository.GLOBAL_SHAPE if expansion_id is None else repository.EXPANSION_SHAPE
        after = context.cursors.decode(cursor, scope, shape)
        async with context.engine.connect() as conn:
            rows, position = await repository.catalog_page(
                conn, expansion_id=expansion_id, after=after, limit=size, with_metadata=with_metadata
            )
            variants, changes = await _extras(conn, [row.id for row in rows], extras)
    else:
        after = context.cursors.decode(cursor, scope, SORT_KEY_SHAPE)
        # The search runs in memory on the worker's read model; the database is asked only for the
        # page's rows, and not at all when nothing matched.
        snapshot = await context.snapshots.get()
        keep = (
            None
            if expansion_id is None
            else (lambda card_id: snapshot.card_expansion.get(card_id) == expansion_id)
        )
        chosen, position = search_page(snapshot.card_search.search(q, keep), after, size)
        scores = [hit.score for hit in chosen]
        if chosen:
            async with context.engine.connect() as conn:
                rows = await repository.cards_by_ids(conn, [hit.id for hit in chosen], with_metadata)
                variants, changes = await _extras(conn, [row.id for row in rows], extras)
    public_url = context.settings.public_url
    items: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        item = records.card_summary(row, public_url)
        if "variants" in extras:
            item["variants"] = variants[row.id]
        if "metadata" in extras:
            item["metadata"] = repository.metadata_json(row.card_metadata)
        if row.id in changes:
            item["change"] = changes[row.id]
        if scores is not None:
            item["score"] = scores[index]
        items.append(item)
    next_cursor = context.cursors.encode(scope, position) if position is not None else None
    return page(items, next_cursor)


async def _extras(
    conn: AsyncConnection, ids: list[str], extras: set[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """The page's printings and price changes, when asked for."""
    variants = await repository.variants_for(conn, ids) if "variants" in extras else {}
    changes = await repository.changes_for(conn, ids) if "change" in extras else {}
    return variants, changes


@router.get("/{card_id}", response_model=Envelope[Card], responses={**BY_ID, **NOT_FOUND})
async def get_card(request: Request, context: Context, card_id: str) -> Response:
    """The full card: every summary field (but `number_normalized`), its printings and its metadata."""

    async def produce() -> dict[str, Any]:
        async with context.engine.connect() as conn:
            row = await repository.card_detail_row(conn, card_id)
            if row is None:
                raise NotFound(f"No card has id {card_id!r}.")
            return (await repository.full_cards(conn, [row], context.settings.public_url))[0]

    return await cached_read(request, context, produce)
