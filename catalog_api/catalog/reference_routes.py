"""Series, expansions and sealed products: small tables served from the per-worker snapshot."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from catalog_api.catalog.readmodel import Snapshot, Table
from catalog_api.catalog.schemas import Expansion, Product, Series
from catalog_api.catalog.search import SORT_KEY_SHAPE, search_page
from catalog_api.deps import AppContext, Context, cached_read
from catalog_api.kit.envelope import page
from catalog_api.kit.errors import NotFound
from catalog_api.kit.pagination import parse_limit
from catalog_api.kit.params import Cursor, Limit, Search
from catalog_api.kit.schemas import BY_ID, ERRORS, NOT_FOUND, Envelope, Page

router = APIRouter(prefix="/v1")


def _list(
    context: AppContext,
    table: Table,
    scope: list[Any],
    limit: str | None,
    cursor: str | None,
    q: str | None,
    keep: Callable[[str], bool] | None,
) -> dict[str, Any]:
    """One page of a small table: in its catalog order, or best match first with `q`."""
    size = parse_limit(limit)
    after = context.cursors.decode(cursor, scope, table.shape if q is None else SORT_KEY_SHAPE)
    items: list[dict[str, Any]]
    if q is None:
        order = [key for key in table.order if keep is None or keep(key[-1])]
        start = 0 if after is None else bisect_right(order, after)
        chosen = order[start : start + size]
        items = [table.records[key[-1]] for key in chosen]
        more = start + size < len(order)
        position = chosen[-1] if more and chosen else None
    else:
        hits, position = search_page(table.search.search(q, keep), after, size)
        items = [{**table.records[hit.id], "score": hit.score} for hit in hits]
    next_cursor = context.cursors.encode(scope, position) if position is not None else None
    return page(items, next_cursor)


def _detail(table: Table, record_id: str, kind: str) -> dict[str, Any]:
    record = table.records.get(record_id)
    if record is None:
        raise NotFound(f"No {kind} has id {record_id!r}.")
    return record


async def _read(
    request: Request, context: AppContext, produce: Callable[[Snapshot], dict[str, Any]]
) -> Response:
    async def run() -> dict[str, Any]:
        return produce(await context.snapshots.get())

    return await cached_read(request, context, run)


@router.get("/series", tags=["series"], response_model=Envelope[Page[Series]], responses=ERRORS)
async def list_series(
    request: Request, context: Context, limit: Limit = None, cursor: Cursor = None, q: Search = None
) -> Response:
    """Series in release order (first release date, then id), each with its expansions in release order."""
    return await _read(
        request, context, lambda snap: _list(context, snap.series, ["series", q], limit, cursor, q, None)
    )


@router.get(
    "/series/{series_id}", tags=["series"], response_model=Envelope[Series], responses={**BY_ID, **NOT_FOUND}
)
async def get_series(request: Request, context: Context, series_id: str) -> Response:
    return await _read(request, context, lambda snap: _detail(snap.series, series_id, "series"))


@router.get("/expansions", tags=["expansions"], response_model=Envelope[Page[Expansion]], responses=ERRORS)
async def list_expansions(
    request: Request,
    context: Context,
    limit: Limit = None,
    cursor: Cursor = None,
    q: Search = None,
    series_id: Annotated[str | None, Query(description="Only this series' expansions.")] = None,
) -> Response:
    """Expansions in release order (release date, then id)."""

    def produce(snap: Snapshot) -> dict[str, Any]:
        records = snap.expansions.records
        keep = None if series_id is None else (lambda eid: records[eid]["series_id"] == series_id)
        return _list(context, snap.expansions, ["expansions", series_id, q], limit, cursor, q, keep)

    return await _read(request, context, produce)


@router.get(
    "/expansions/{expansion_id}",
    tags=["expansions"],
    response_model=Envelope[Expansion],
    responses={**BY_ID, **NOT_FOUND},
)
async def get_expansion(request: Request, context: Context, expansion_id: str) -> Response:
    return await _read(request, context, lambda snap: _detail(snap.expansions, expansion_id, "expansion"))


@router.get("/products", tags=["products"], response_model=Envelope[Page[Product]], responses=ERRORS)
async def list_products(
    request: Request,
    context: Context,
    limit: Limit = None,
    cursor: Cursor = None,
    q: Search = None,
    expansion_id: Annotated[
        str | None, Query(description="Only products listed under this expansion.")
    ] = None,
) -> Response:
    """Sealed products by id."""

    def produce(snap: Snapshot) -> dict[str, Any]:
        links = snap.product_expansions
        keep = None if expansion_id is None else (lambda pid: expansion_id in links.get(pid, ()))
        return _list(context, snap.products, ["products", expansion_id, q], limit, cursor, q, keep)

    return await _read(request, context, produce)


@router.get(
    "/products/{product_id}",
    tags=["products"],
    response_model=Envelope[Product],
    responses={**BY_ID, **NOT_FOUND},
)
async def get_product(request: Request, context: Context, product_id: str) -> Response:
    return await _read(request, context, lambda snap: _detail(snap.products, product_id, "product"))
