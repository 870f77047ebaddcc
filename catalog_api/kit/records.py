"""Database rows -> the API's record shapes (one place, so `/v1` reads, bulk files and event payloads
agree). Shared by the catalog's answers, the prices room's entries and the events' payloads, so it lives
in the kit: the events room builds card records without importing the catalog room."""

from __future__ import annotations

from typing import Any

from catalog_api.kit.images import image_urls
from catalog_api.kit.models import Card

# The card columns a card summary is built from (`card_summary`), read by the catalog and the events.
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


def price_entry(row: Any) -> dict[str, Any]:
    """One Price (a row of `card_prices_current` or `product_prices_current`); products add `variant`."""
    entry = {
        "condition": row.condition,
        "currency": "USD",
        "market": row.market,
        "low": row.low,
        "high": row.high,
        "listing_count": row.listing_count,
        "observed_on": row.observed_on,
    }
    if hasattr(row, "variant"):
        entry["variant"] = row.variant
    return entry


def variant_record(row: Any, marketplace: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": row.id,
        "type": row.type,
        "subtype": row.subtype,
        "size": row.size,
        "stamps": list(row.stamps or []),
        "foil": row.foil,
        "marketplace": marketplace or [],
    }


def change_entry(row: Any) -> dict[str, Any]:
    """A Change entry (a row of `card_movers`)."""
    return {
        "window": row.window,
        "card_variant_id": row.card_variant_id,
        "printing": row.printing,
        "start_cents": row.start_cents,
        "end_cents": row.end_cents,
        "change_cents": row.change_cents,
        "change_bp": row.change_bp,
        "start_as_of": row.start_as_of,
        "observed_on": row.observed_on,
    }


def card_summary(row: Any, public_url: str) -> dict[str, Any]:
    return {
        "id": row.id,
        "expansion_id": row.expansion_id,
        "number": row.number,
        "name": row.name,
        "rarity": row.rarity,
        "illustrator": row.illustrator,
        "image": image_urls(public_url, row.image_key),
        "palette": row.palette,
        "category": row.category,
        "number_normalized": row.number_normalized,
    }


def card_detail(row: Any, variants: list[dict[str, Any]], public_url: str, metadata: Any) -> dict[str, Any]:
    """The full card object: the summary (less `number_normalized`) with variants and metadata."""
    record = card_summary(row, public_url)
    del record["number_normalized"]
    record["variants"] = variants
    record["metadata"] = metadata
    return record


def _logo(url: str | None) -> dict[str, str] | None:
    # Upstream asset URLs are bases; the renderer's convention appends /low.png and /high.png.
    return None if not url else {"low": f"{url}/low.png", "high": f"{url}/high.png"}


def _symbol(url: str | None) -> str | None:
    return None if not url else f"{url}/low.png"


def expansion_record(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "series_id": row.series_id,
        "name": row.name,
        "logo": _logo(row.logo_url),
        "symbol": _symbol(row.symbol_url),
        "palette": None,
        "release_date": row.release_date,
        "card_count_total": row.card_count_total,
        "card_count_official": row.card_count_official,
        "legal_standard": row.legal_standard,
        "legal_expanded": row.legal_expanded,
    }


def series_record(row: Any, expansions: list[Any]) -> dict[str, Any]:
    """`expansions` in release order. The feed has no series logos: a series shows the logo of its first
    expansion that has one (as the printed series branding does).

    Palettes: the service holds no logo images (the feed gives only upstream logo URLs), so an expansion's
    `palette` is null ("null when no image is available") and a series' is [] (the contract makes it an
    array; empty is "never padded"). Card palettes are not pooled into them: a set's cards are not its
    logo, and a mix of hundreds of arts has no dominant colour worth the name."""
    logo_url = row.logo_url or next((e.logo_url for e in expansions if e.logo_url), None)
    return {
        "id": row.id,
        "name": row.name,
        "logo": _logo(logo_url),
        "palette": [],
        "expansions": [
            {
                "id": e.id,
                "name": e.name,
                "logo": _logo(e.logo_url),
                "symbol": _symbol(e.symbol_url),
                "palette": None,
                "release_date": e.release_date,
                "card_count_total": e.card_count_total,
            }
            for e in expansions
        ],
    }


def product_record(row: Any, marketplace: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "clean_name": row.clean_name,
        "number": row.number,
        "image": None if not row.image_url else {"low": row.image_url, "high": row.image_url},
        "marketplace_url": row.marketplace_url,
        "expansions": row.expansions,
        "marketplace": marketplace or [],
    }
