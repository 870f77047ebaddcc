"""`GET /v1/movers`: the leaderboard of biggest price gainers and losers (see `prices/movers.py`), as a
page of card summaries: it lives with the card routes because it shows cards, and reads the ranks from
the prices room (`prices.price_reads`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from catalog_api.catalog import repository
from catalog_api.catalog.schemas import CardSummary
from catalog_api.deps import Context, cached_read
from catalog_api.kit import records
from catalog_api.kit.envelope import page
from catalog_api.kit.languages import dress, parse_lang
from catalog_api.kit.pagination import parse_limit, parse_query_int
from catalog_api.kit.params import Cursor, Lang, Limit
from catalog_api.kit.schemas import ERRORS, Envelope, Page
from catalog_api.prices import price_reads
from catalog_api.prices.movers import WINDOWS
from core.errors import BadRequest

router = APIRouter(prefix="/v1/movers", tags=["movers"])
DIRECTIONS = ("gainers", "losers")


@router.get("", response_model=Envelope[Page[CardSummary]], responses=ERRORS)
async def list_movers(
    request: Request,
    context: Context,
    window: Annotated[
        str,
        Query(description="Price window: `1d`, `7d` or `30d`.", json_schema_extra={"enum": list(WINDOWS)}),
    ] = "7d",
    direction: Annotated[
        str,
        Query(
            description="`gainers` (biggest rise first) or `losers` (biggest fall first).",
            json_schema_extra={"enum": list(DIRECTIONS)},
        ),
    ] = "gainers",
    expansion_id: Annotated[str | None, Query(description="Only this expansion's cards.")] = None,
    min_cents: Annotated[
        str | None,
        Query(
            description="Only cards priced at least this many cents at both ends of the window (so a "
            "3-cent card doubling does not top the board). Default 0."
        ),
    ] = None,
    limit: Limit = None,
    cursor: Cursor = None,
    lang: Lang = None,
) -> Response:
    """Cards whose headline price moved most over the window, ranked by `change_bp` (then
    `change_cents`, then id). Rows are card summaries carrying `change` (every computed window of the
    headline printing, as with `include=change`). Cards that did not move in that direction are left out.
    An unknown `window` or `direction` is `400 bad_request`."""
    if window not in WINDOWS:
        raise BadRequest(f"window must be one of {', '.join(WINDOWS)}.")
    if direction not in DIRECTIONS:
        raise BadRequest(f"direction must be one of {', '.join(DIRECTIONS)}.")
    floor = 0 if min_cents is None else _cents(min_cents)
    language = parse_lang(lang)

    async def produce() -> dict[str, Any]:
        size = parse_limit(limit)
        scope = ["movers", window, direction, expansion_id, floor]
        after = context.cursors.decode(cursor, scope, price_reads.MOVERS_SHAPE)
        async with context.engine.connect() as conn:
            ids, position = await price_reads.movers_page(
                conn,
                window=window,
                direction=direction,
                expansion_id=expansion_id,
                min_cents=floor,
                after=after,
                limit=size,
            )
            rows = await repository.cards_by_ids(conn, ids, False)
            changes = await price_reads.changes_for(conn, ids)
        items = []
        for row in rows:
            item = records.card_summary(row, context.settings.public_url)
            dress(item, row.names, language, False)
            item["change"] = changes.get(row.id, [])
            items.append(item)
        next_cursor = context.cursors.encode(scope, position) if position is not None else None
        return page(items, next_cursor)

    return await cached_read(request, context, produce)


def _cents(raw: str) -> int:
    """ASCII digits only: str.isdigit() also passes `²` (which int() then refuses) and other scripts'
    digits."""
    value = parse_query_int(raw) if len(raw) <= 12 else None
    if value is None or value < 0 or raw.startswith("-"):
        raise BadRequest("min_cents must be a whole number of cents (0 or more).")
    return value
