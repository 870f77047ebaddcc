"""Wire shapes of the prices room's own reads (OpenAPI documents them; tests validate against them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catalog_api.kit.schemas import Strict


class PricePoint(Strict):
    date: str = Field(description="The calendar day, `YYYY-MM-DD`.")
    market: int | None = Field(description="Cents, from the last feed row on or before `date`.")
    low: int | None
    high: int | None
    listing_count: int | None = Field(le=25)
    observed_on: str = Field(description="The day of the feed row this point carries (on or before `date`).")


class CardPriceHistory(Strict):
    card_id: str
    variant_id: int | None = Field(description="The printing; null only for a card with no printings.")
    condition: str
    currency: Literal["USD"]
    points: list[PricePoint] = Field(
        description="One per calendar day from `from` (or the first observation, if later) to `to`."
    )


class ProductPriceHistory(Strict):
    product_id: int
    variant: str | None = Field(description="The sealed variant; null only for a product never priced.")
    condition: str
    currency: Literal["USD"]
    points: list[PricePoint] = Field(
        description="One per calendar day from `from` (or the first observation, if later) to `to`."
    )
