"""`GET /v1/cards/{id}/prices` and `GET /v1/products/{id}/prices`: daily price history (see `history.py`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from catalog_api.deps import Context, cached_read
from catalog_api.kit.schemas import ERRORS, NOT_FOUND, Envelope
from catalog_api.prices import history
from catalog_api.prices.schemas import CardPriceHistory, ProductPriceHistory

router = APIRouter(prefix="/v1")

From = Annotated[
    str | None,
    Query(
        alias="from",
        description="First day, `YYYY-MM-DD` (default: 89 days before `to`). Points start here or at the "
        "first observation, whichever is later.",
    ),
]
To = Annotated[
    str | None,
    Query(
        description="Last day, `YYYY-MM-DD` (default: the newest observation). At most 366 days after `from`."
    ),
]
Condition = Annotated[
    str | None, Query(description="Condition code: `NM` (default), `LP`, `MP`, `HP` or `DMG`.")
]
HISTORY_ERRORS = {**ERRORS, **NOT_FOUND}


def log_days_cache(request: Request) -> history.LogDaysCache:
    """The app's own cache of the card log's days (on `app.state`: one per app, so two apps in one
    process, each on its own database, never share it)."""
    state = request.app.state
    cache: history.LogDaysCache | None = getattr(state, "price_log_days", None)
    if cache is None:
        cache = state.price_log_days = history.LogDaysCache()
    return cache


@router.get(
    "/cards/{card_id}/prices",
    tags=["cards"],
    response_model=Envelope[CardPriceHistory],
    responses=HISTORY_ERRORS,
)
async def card_price_history(
    request: Request,
    context: Context,
    card_id: str,
    variant_id: Annotated[
        str | None,
        Query(
            description="A printing of this card (`variants[].id`); default its headline printing, "
            "else its first."
        ),
    ] = None,
    condition: Condition = None,
    from_: From = None,
    to: To = None,
) -> Response:
    """One point per calendar day for one printing and condition, each carrying the last feed row
    observed on or before that day (nulls included; `observed_on` is that row's day). An unknown card, or
    a `variant_id` not of this card, is `404 not_found`; a malformed date, `from` after `to` or a span
    over 366 days is `400 bad_request`."""
    wanted_variant = history.parse_variant_id(variant_id)
    wanted_condition = history.parse_condition(condition)
    history.check_days(from_, to)

    async def produce() -> dict[str, Any]:
        version = await context.data_version()
        async with context.engine.connect() as conn:
            log_days = await log_days_cache(request).get(conn, version)
            span = history.window(from_, to, log_days.newest)
            printing = await history.card_printing(conn, card_id, wanted_variant)
            rows = (
                []
                if printing is None
                else await history.card_history(conn, printing, wanted_condition, span, log_days)
            )
        return {
            "card_id": card_id,
            "variant_id": printing,
            "condition": wanted_condition,
            "currency": "USD",
            "points": history.points(rows, span),
        }

    return await cached_read(request, context, produce)


@router.get(
    "/products/{product_id}/prices",
    tags=["products"],
    response_model=Envelope[ProductPriceHistory],
    responses=HISTORY_ERRORS,
)
async def product_price_history(
    request: Request,
    context: Context,
    product_id: str,
    variant: Annotated[
        str | None,
        Query(
            max_length=200,
            description="A sealed variant of this product (`marketplace[].variant`, e.g. `Normal`); default "
            "its first variant with a current NM market, else its first priced variant.",
        ),
    ] = None,
    condition: Condition = None,
    from_: From = None,
    to: To = None,
) -> Response:
    """The same daily history for a sealed product's variant. An unknown product, or a `variant` it was
    never priced in, is `404 not_found`."""
    wanted_condition = history.parse_condition(condition)
    history.check_days(from_, to)

    async def produce() -> dict[str, Any]:
        version = await context.data_version()
        async with context.engine.connect() as conn:
            span = history.window(from_, to, (await log_days_cache(request).get(conn, version)).newest)
            chosen = await history.product_variant(conn, product_id, variant)
            pid = int(product_id)
            rows = (
                []
                if chosen is None
                else await history.product_history(conn, pid, chosen, wanted_condition, span.end)
            )
        return {
            "product_id": pid,
            "variant": chosen,
            "condition": wanted_condition,
            "currency": "USD",
            "points": history.points(rows, span),
        }

    return await cached_read(request, context, produce)
