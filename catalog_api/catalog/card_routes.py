"""`GET /v1/cards` and `GET /v1/cards/{id}`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from catalog_api.catalog import repository
from catalog_api.catalog.card_query import LEGAL, SORTS, CardFilter, parse_filter, parse_ids, parse_sort
from catalog_api.catalog.card_table import SHAPES
from catalog_api.catalog.readmodel import SnapshotHolder, Snapshots
from catalog_api.catalog.schemas import Card, CardSummary
from catalog_api.catalog.search import SORT_KEY_SHAPE, search_page
from catalog_api.deps import AppContext, Context, cached_read
from catalog_api.kit import records
from catalog_api.kit.envelope import page
from catalog_api.kit.languages import dress, parse_lang
from catalog_api.kit.pagination import parse_limit
from catalog_api.kit.params import Cursor, Lang, Limit, Search
from catalog_api.kit.schemas import ERRORS, NOT_FOUND, Envelope, Page
from catalog_api.prices import price_reads
from core.errors import NotFound

router = APIRouter(prefix="/v1/cards", tags=["cards"])
INCLUDES = ("variants", "metadata", "change", "names")
WORD = "Exact match, case-insensitive"


def parse_include(raw: str | None) -> set[str]:
    """Comma-separated extras; unknown values are dropped, not rejected."""
    return {part.strip() for part in (raw or "").split(",")} & set(INCLUDES)


@router.get("", response_model=Envelope[Page[CardSummary]], responses=ERRORS)
async def list_cards(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    limit: Limit = None,
    cursor: Cursor = None,
    expansion_id: Annotated[str | None, Query(description="Only this expansion's cards.")] = None,
    q: Search = None,
    include: Annotated[
        str | None, Query(description="Comma-separated: variants, metadata, change, names.")
    ] = None,
    ids: Annotated[
        str | None,
        Query(
            description="Comma-separated card ids, at most 200 (more is `400`): those cards, in the "
            "order given, each once; ids naming no card are left out; `next_cursor` is null. Composes "
            "with `include` and `lang`; with `q`, `sort`, `expansion_id` or a filter it is `400`; "
            "`limit` and `cursor` do not apply."
        ),
    ] = None,
    rarity: Annotated[str | None, Query(description=f"{WORD}. A feed rarity of `None` is null.")] = None,
    category: Annotated[str | None, Query(description=f"{WORD} (`Pokemon`, `Trainer`, `Energy`).")] = None,
    illustrator: Annotated[str | None, Query(description=f"{WORD}.")] = None,
    type: Annotated[
        str | None, Query(description=f"Cards whose `metadata.types` include this type. {WORD}.")
    ] = None,
    hp_min: Annotated[
        str | None, Query(description="HP at least this (whole number); cards without HP are left out.")
    ] = None,
    hp_max: Annotated[
        str | None,
        Query(description="HP at most this; cards without HP are left out. Below `hp_min` is `400`."),
    ] = None,
    legal: Annotated[
        str | None,
        Query(description="Only cards legal in this format.", json_schema_extra={"enum": list(LEGAL)}),
    ] = None,
    price_min: Annotated[
        str | None,
        Query(
            description="Headline printing's current NM market at least this many cents (0 or more); "
            "unpriced cards are left out."
        ),
    ] = None,
    price_max: Annotated[
        str | None,
        Query(description="Headline NM market at most this many cents. Below `price_min` is `400`."),
    ] = None,
    sort: Annotated[
        str | None,
        Query(
            description="`catalog` (default), `name`, `-name`, `release`, `-release`, `price`, `-price` "
            "(the headline printing's NM market; unpriced cards last in both). Ties by id. With `q` "
            "only `catalog` (rows are by score).",
            json_schema_extra={"enum": list(SORTS)},
        ),
    ] = None,
    lang: Lang = None,
) -> Response:
    """Cards in catalog order (expansion by release date, collector number numerically with non-numeric
    numbers last, then id), in another `sort`, or best match first with `q` (which searches the name in
    every language the feed carries). Filters compose with each other, with `expansion_id` and with `q`;
    a value matching nothing is an empty page. `ids` looks up many cards at once."""
    wanted = parse_filter(
        expansion_id=expansion_id,
        rarity=rarity,
        category=category,
        illustrator=illustrator,
        type_=type,
        hp_min=hp_min,
        hp_max=hp_max,
        legal=legal,
        price_min=price_min,
        price_max=price_max,
    )
    order = parse_sort(sort, q)
    language = parse_lang(lang)
    extras = parse_include(include)
    chosen_ids = None if ids is None else parse_ids(ids, q=q, sort=sort, card_filter=wanted)

    async def produce() -> dict[str, Any]:
        if chosen_ids is not None:
            return await _ids_page(context, snapshots, chosen_ids, extras, language)
        return await _card_page(context, snapshots, limit, cursor, wanted, order, q, extras, language)

    return await cached_read(request, context, produce)


async def _ids_page(
    context: AppContext, snapshots: SnapshotHolder, ids: list[str], extras: set[str], language: str | None
) -> dict[str, Any]:
    """The cards `ids` names, in its order; ids the read model does not hold are left out before SQL."""
    snapshot = await snapshots.get()
    known = [card_id for card_id in ids if card_id in snapshot.cards.by_id]
    rows: Sequence[Any] = []
    variants: dict[str, list[dict[str, Any]]] = {}
    changes: dict[str, list[dict[str, Any]]] = {}
    if known:
        async with context.engine.connect() as conn:
            rows = await repository.cards_by_ids(conn, known, "metadata" in extras)
            variants, changes = await _extras(conn, [row.id for row in rows], extras)
    items = _items(context, rows, extras, variants, changes, None, language)
    return page(items, None)


async def _card_page(
    context: AppContext,
    snapshots: SnapshotHolder,
    limit: str | None,
    cursor: str | None,
    wanted: CardFilter,
    order: str,
    q: str | None,
    extras: set[str],
    language: str | None,
) -> dict[str, Any]:
    size = parse_limit(limit)
    expansion_id = wanted.expansion_id
    filtered = wanted.beyond_expansion
    with_metadata = "metadata" in extras
    scores: list[float] | None = None
    rows: Sequence[Any] = []
    variants: dict[str, list[dict[str, Any]]] = {}
    changes: dict[str, list[dict[str, Any]]] = {}
    page_ids: list[str] = []
    if q is None and order == "catalog" and not filtered:
        # The plain catalog: one keyset range scan on the catalog-order index.
        scope: list[Any] = ["cards", expansion_id, q]
        shape = repository.GLOBAL_SHAPE if expansion_id is None else repository.EXPANSION_SHAPE
        after = context.cursors.decode(cursor, scope, shape)
        async with context.engine.connect() as conn:
            rows, position = await repository.catalog_page(
                conn, expansion_id=expansion_id, after=after, limit=size, with_metadata=with_metadata
            )
            variants, changes = await _extras(conn, [row.id for row in rows], extras)
    else:
        snapshot = await snapshots.get()
        if q is None:
            # Filters and sorts run in memory on the worker's read model (card_table); the database is
            # asked only for the page's rows.
            scope = ["cards", order, *wanted.scope()]
            after = context.cursors.decode(cursor, scope, SHAPES[order])
            page_ids, position = snapshot.cards.page(wanted, order, after, size)
        else:
            # The search runs in memory too; the database is asked only for the page's rows, and not
            # at all when nothing matched.
            scope = ["cards", expansion_id, q, *(wanted.scope() if filtered else [])]
            after = context.cursors.decode(cursor, scope, SORT_KEY_SHAPE)
            keep = None if wanted == CardFilter() else snapshot.cards.keep(wanted)
            chosen, position = search_page(snapshot.card_search.search(q, keep), after, size)
            scores = [hit.score for hit in chosen]
            page_ids = [hit.id for hit in chosen]
        if page_ids:
            async with context.engine.connect() as conn:
                rows = await repository.cards_by_ids(conn, page_ids, with_metadata)
                variants, changes = await _extras(conn, [row.id for row in rows], extras)
        if scores is not None and len(rows) != len(page_ids):
            # A card deleted since the snapshot: keep each score beside its own row.
            by_id = dict(zip(page_ids, scores, strict=True))
            scores = [by_id[row.id] for row in rows]
    items = _items(context, rows, extras, variants, changes, scores, language)
    next_cursor = context.cursors.encode(scope, position) if position is not None else None
    return page(items, next_cursor)


def _items(
    context: AppContext,
    rows: Sequence[Any],
    extras: set[str],
    variants: dict[str, list[dict[str, Any]]],
    changes: dict[str, list[dict[str, Any]]],
    scores: list[float] | None,
    language: str | None,
) -> list[dict[str, Any]]:
    """Card summary rows with the extras asked for."""
    public_url = context.settings.public_url
    items: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        item = records.card_summary(row, public_url)
        dress(item, row.names, language, "names" in extras)
        if "variants" in extras:
            item["variants"] = variants[row.id]
        if "metadata" in extras:
            item["metadata"] = repository.metadata_json(row.card_metadata)
        if row.id in changes:
            item["change"] = changes[row.id]
        if scores is not None:
            item["score"] = scores[index]
        items.append(item)
    return items


async def _extras(
    conn: AsyncConnection, ids: list[str], extras: set[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """The page's printings and price changes, when asked for."""
    variants = await repository.variants_for(conn, ids) if "variants" in extras else {}
    changes = await price_reads.changes_for(conn, ids) if "change" in extras else {}
    return variants, changes


@router.get("/{card_id}", response_model=Envelope[Card], responses={**ERRORS, **NOT_FOUND})
async def get_card(
    request: Request,
    context: Context,
    card_id: str,
    lang: Lang = None,
    include: Annotated[str | None, Query(description="`names`: add the `names` object.")] = None,
) -> Response:
    """The full card: every summary field (but `number_normalized`), its printings and its metadata."""
    language = parse_lang(lang)
    with_names = "names" in parse_include(include)

    async def produce() -> dict[str, Any]:
        async with context.engine.connect() as conn:
            row = await repository.card_detail_row(conn, card_id)
            if row is None:
                raise NotFound(f"No card has id {card_id!r}.")
            record = (await repository.full_cards(conn, [row], context.settings.public_url))[0]
        dress(record, row.names, language, with_names)
        return record

    return await cached_read(request, context, produce)
