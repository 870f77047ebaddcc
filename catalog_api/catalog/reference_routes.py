"""Series, expansions and sealed products: small tables served from the per-worker snapshot."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from catalog_api.catalog.readmodel import Snapshot, SnapshotHolder, Snapshots, Table
from catalog_api.catalog.schemas import Expansion, Product, Series
from catalog_api.catalog.search import SORT_KEY_SHAPE, search_page
from catalog_api.deps import AppContext, Context, cached_read
from catalog_api.kit.envelope import page
from catalog_api.kit.languages import dress, localized, parse_lang
from catalog_api.kit.pagination import parse_limit
from catalog_api.kit.params import Cursor, Lang, Limit, Search
from catalog_api.kit.schemas import ERRORS, NOT_FOUND, Envelope, Page
from core.errors import NotFound

router = APIRouter(prefix="/v1")


def _list(
    context: AppContext,
    table: Table,
    scope: list[Any],
    limit: str | None,
    cursor: str | None,
    q: str | None,
    keep: Callable[[str], bool] | None,
    view: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """One page of a small table: in its catalog order, or best match first with `q` (names in every
    language the feed carries); each record as `view` shows it (its `lang` and `include`)."""
    size = parse_limit(limit)
    after = context.cursors.decode(cursor, scope, table.shape if q is None else SORT_KEY_SHAPE)
    items: list[dict[str, Any]]
    if q is None:
        order = [key for key in table.order if keep is None or keep(key[-1])]
        start = 0 if after is None else bisect_right(order, after)
        chosen = order[start : start + size]
        items = [view(table.records[key[-1]]) for key in chosen]
        more = start + size < len(order)
        position = chosen[-1] if more and chosen else None
    else:
        hits, position = search_page(table.search.search(q, keep), after, size)
        items = [{**view(table.records[hit.id]), "score": hit.score} for hit in hits]
    next_cursor = context.cursors.encode(scope, position) if position is not None else None
    return page(items, next_cursor)


def _detail(
    table: Table, record_id: str, kind: str, view: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    record = table.records.get(record_id)
    if record is None:
        raise NotFound(f"No {kind} has id {record_id!r}.")
    return view(record)


Include = Annotated[str | None, Query(description="`names`: add each record's `names` object.")]


def _viewer(
    snap: Snapshot, table: Table, lang: str | None, include: str | None
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """How a record of `table` is served under `lang` and `include=names` (checked before any read):
    its own name, and the names of the expansions it lists (series, products), in that language."""
    language = parse_lang(lang)
    with_names = "names" in {part.strip() for part in (include or "").split(",")}
    if language is None and not with_names:
        return lambda record: record
    expansion_names = snap.expansions.names

    def view(record: dict[str, Any]) -> dict[str, Any]:
        shown = dict(record)
        dress(shown, table.names.get(str(record["id"])), language, with_names)
        if language is not None and table is not snap.expansions:
            shown["expansions"] = [
                {**e, "name": localized(e["name"], expansion_names.get(e["id"]), language)}
                for e in record["expansions"]
            ]
        return shown

    return view


Keep = Callable[[str], bool] | None  # which records of a table a list keeps (None: all)


async def _read(
    request: Request,
    context: AppContext,
    snapshots: SnapshotHolder,
    produce: Callable[[Snapshot], dict[str, Any]],
) -> Response:
    async def run() -> dict[str, Any]:
        return produce(await snapshots.get())

    return await cached_read(request, context, run)


async def _table_page(
    request: Request,
    context: AppContext,
    snapshots: SnapshotHolder,
    kind: str,
    filters: list[Any],
    keep: Callable[[Snapshot], Keep],
    asked: tuple[str | None, str | None, str | None, str | None, str | None],
) -> Response:
    """What each list route of a small table does: one page of `snap.<kind>` (`series`, `expansions`,
    `products`), the records `keep` keeps, under the cursor scope `[kind, *filters, q]`. `asked` is the
    route's (limit, cursor, q, lang, include); `lang` is checked before any read."""
    limit, cursor, q, lang, include = asked
    parse_lang(lang)

    def produce(snap: Snapshot) -> dict[str, Any]:
        table: Table = getattr(snap, kind)
        view = _viewer(snap, table, lang, include)
        return _list(context, table, [kind, *filters, q], limit, cursor, q, keep(snap), view)

    return await _read(request, context, snapshots, produce)


async def _table_record(
    request: Request,
    context: AppContext,
    snapshots: SnapshotHolder,
    kind: str,
    noun: str,
    record_id: str,
    lang: str | None,
    include: str | None,
) -> Response:
    """What each detail route of a small table does: the record of `snap.<kind>` with that id, or `404`
    naming the `noun`."""
    parse_lang(lang)

    def produce(snap: Snapshot) -> dict[str, Any]:
        table: Table = getattr(snap, kind)
        return _detail(table, record_id, noun, _viewer(snap, table, lang, include))

    return await _read(request, context, snapshots, produce)


@router.get("/series", tags=["series"], response_model=Envelope[Page[Series]], responses=ERRORS)
async def list_series(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    limit: Limit = None,
    cursor: Cursor = None,
    q: Search = None,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    """Series in release order (first release date, then id), each with its expansions in release order."""
    asked = (limit, cursor, q, lang, include)
    return await _table_page(request, context, snapshots, "series", [], lambda snap: None, asked)


@router.get(
    "/series/{series_id}", tags=["series"], response_model=Envelope[Series], responses={**ERRORS, **NOT_FOUND}
)
async def get_series(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    series_id: str,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    return await _table_record(request, context, snapshots, "series", "series", series_id, lang, include)


@router.get("/expansions", tags=["expansions"], response_model=Envelope[Page[Expansion]], responses=ERRORS)
async def list_expansions(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    limit: Limit = None,
    cursor: Cursor = None,
    q: Search = None,
    series_id: Annotated[str | None, Query(description="Only this series' expansions.")] = None,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    """Expansions in release order (release date, then id)."""

    def keep(snap: Snapshot) -> Keep:
        records = snap.expansions.records
        return None if series_id is None else (lambda eid: records[eid]["series_id"] == series_id)

    asked = (limit, cursor, q, lang, include)
    return await _table_page(request, context, snapshots, "expansions", [series_id], keep, asked)


@router.get(
    "/expansions/{expansion_id}",
    tags=["expansions"],
    response_model=Envelope[Expansion],
    responses={**ERRORS, **NOT_FOUND},
)
async def get_expansion(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    expansion_id: str,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    return await _table_record(
        request, context, snapshots, "expansions", "expansion", expansion_id, lang, include
    )


@router.get("/products", tags=["products"], response_model=Envelope[Page[Product]], responses=ERRORS)
async def list_products(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    limit: Limit = None,
    cursor: Cursor = None,
    q: Search = None,
    expansion_id: Annotated[
        str | None, Query(description="Only products listed under this expansion.")
    ] = None,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    """Sealed products by id. The feed names products in English only: `lang` translates the names of
    the expansions a product lists, and `include=names` gives `{}`."""

    def keep(snap: Snapshot) -> Keep:
        links = snap.product_expansions
        return None if expansion_id is None else (lambda pid: expansion_id in links.get(pid, ()))

    asked = (limit, cursor, q, lang, include)
    return await _table_page(request, context, snapshots, "products", [expansion_id], keep, asked)


@router.get(
    "/products/{product_id}",
    tags=["products"],
    response_model=Envelope[Product],
    responses={**ERRORS, **NOT_FOUND},
)
async def get_product(
    request: Request,
    context: Context,
    snapshots: Snapshots,
    product_id: str,
    lang: Lang = None,
    include: Include = None,
) -> Response:
    return await _table_record(request, context, snapshots, "products", "product", product_id, lang, include)
