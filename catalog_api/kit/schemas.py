"""Pydantic models of the wire shapes. They document the API in OpenAPI (`/openapi.json`); handlers
serialise plain dicts with orjson for speed, and the tests validate responses against these models."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(Strict):
    code: str = Field(description="Stable machine token; branch on it.")
    message: str = Field(min_length=1)


class ErrorEnvelope(Strict):
    data: None
    error: ErrorBody


class Envelope(Strict, Generic[T]):
    data: T
    error: None


class Page(Strict, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class Image(Strict):
    low: str
    high: str


class Price(Strict):
    condition: str
    currency: Literal["USD"]
    market: int | None
    low: int | None
    high: int | None
    listing_count: int | None = Field(le=25)
    observed_on: str


class ProductPrice(Price):
    variant: str


class Variant(Strict):
    id: int
    type: str
    subtype: str | None
    size: str | None
    stamps: list[str]
    foil: str | None
    marketplace: list[Price]


class Ability(Strict):
    kind: str
    name: str
    text: str | None


class Attack(Strict):
    name: str
    cost: list[str] | None
    damage: str | None
    text: str | None


class Modifier(Strict):
    type: str
    modifier: str | None


class Legality(Strict):
    standard: bool
    expanded: bool


class Metadata(Strict):
    hp: float | None
    types: list[str] | None
    dex_numbers: list[float] | None
    stage: str | None
    evolve_from: str | None
    description: str | None
    effect: str | None
    trainer_type: str | None
    energy_type: str | None
    retreat: float | None
    abilities: list[Ability] | None
    attacks: list[Attack] | None
    weaknesses: list[Modifier] | None
    resistances: list[Modifier] | None
    legality: Legality | None


class Change(Strict):
    window: Literal["1d", "7d", "30d"]
    card_variant_id: int
    printing: str
    start_cents: int
    end_cents: int
    change_cents: int
    change_bp: int
    start_as_of: str
    observed_on: str


class CardSummary(Strict):
    id: str
    expansion_id: str
    number: str | None
    name: str
    rarity: str | None
    illustrator: str | None
    image: Image | None
    palette: list[str] | None = Field(max_length=4)
    category: str | None
    number_normalized: str | None
    variants: list[Variant] | None = Field(None, description="Only with include=variants.")
    metadata: Metadata | None = Field(None, description="Only with include=metadata.")
    change: list[Change] | None = Field(None, description="Only with include=change and a mover row.")
    score: float | None = Field(None, ge=0, le=1, description="Only when q is set.")


class Card(Strict):
    id: str
    expansion_id: str
    number: str | None
    name: str
    rarity: str | None
    illustrator: str | None
    image: Image | None
    palette: list[str] | None
    category: str | None
    variants: list[Variant]
    metadata: Metadata | None


class Expansion(Strict):
    id: str
    series_id: str
    name: str
    logo: Image | None
    symbol: str | None
    palette: list[str] | None
    release_date: str
    card_count_total: int
    card_count_official: int
    legal_standard: bool
    legal_expanded: bool
    score: float | None = Field(None, ge=0, le=1, description="Only when q is set.")


class SeriesExpansion(Strict):
    id: str
    name: str
    logo: Image | None
    symbol: str | None
    palette: list[str] | None
    release_date: str
    card_count_total: int


class Series(Strict):
    id: str
    name: str
    logo: Image | None
    palette: list[str] | None
    expansions: list[SeriesExpansion]
    score: float | None = Field(None, ge=0, le=1, description="Only when q is set.")


class ProductExpansion(Strict):
    id: str
    name: str


class Product(Strict):
    id: int
    name: str
    clean_name: str
    number: str | None
    image: Image | None
    marketplace_url: str
    expansions: list[ProductExpansion]
    marketplace: list[ProductPrice]
    score: float | None = Field(None, ge=0, le=1, description="Only when q is set.")


class ScanExpansion(Strict):
    id: str
    name: str


class ScanCard(Strict):
    id: str
    name: str
    category: str | None
    rarity: str | None
    number: str | None
    image: Image | None
    expansion: ScanExpansion


class ScanMatch(Strict):
    score: float = Field(ge=0, le=1)
    card: ScanCard


class ScanAnalysis(Strict):
    game: str | None = Field(description="`cardgame`; null when `matches` is empty.")


class Unidentified(Strict):
    reason: Literal["print_unreadable", "no_confident_match"]
    message: str


class ScanResult(Strict):
    analysis: ScanAnalysis
    matches: list[ScanMatch] = Field(max_length=5, description="Best first: one when confident, up to five.")
    unidentified: Unidentified | None


class FeedHealth(Strict):
    status: str = Field(description="ok, stale or never_synced")
    synced_at: str | None = Field(description="ISO 8601 UTC time of the last successful sync")
    observed_on: str | None


class Health(Strict):
    status: Literal["ok", "degraded"]
    feeds: dict[str, FeedHealth]
    last_updated: str | None


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorEnvelope, "description": "bad_request"},
    401: {
        "model": ErrorEnvelope,
        "description": "unauthorized",
        "headers": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    },
    429: {"model": ErrorEnvelope, "description": "rate_limited (see Retry-After)"},
    500: {"model": ErrorEnvelope, "description": "internal"},
}
# A single record by id takes no query and no body: nothing in it can be a bad request.
BY_ID: dict[int | str, dict[str, Any]] = {status: body for status, body in ERRORS.items() if status != 400}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorEnvelope, "description": "not_found"}}


def file_responses(media_type: str, signed: bool = False) -> dict[int | str, dict[str, Any]]:
    """The statuses of a file route (Starlette's FileResponse, outside `/v1`: no key, no rate limit).

    FileResponse answers `Range` itself: `206` for a satisfiable range, `416` for one past the end and a
    plain-text `400` for a malformed one; it does not answer conditional requests (no `304`). A `signed`
    route also answers `401` to a URL whose signature or expiry is wrong."""
    responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": "The file",
            "content": {media_type: {"schema": {"type": "string", "format": "binary"}}},
        },
        206: {"description": "Partial Content: the byte range `Range` asked for"},
        400: {"description": "Malformed `Range` header (plain text)"},
        404: {"model": ErrorEnvelope, "description": "not_found"},
        416: {"description": "Range Not Satisfiable (plain text, with `Content-Range: bytes */size`)"},
        500: {"model": ErrorEnvelope, "description": "internal"},
    }
    if signed:
        responses[401] = {
            "model": ErrorEnvelope,
            "description": "unauthorized: the URL's `expires` or `signature` is wrong or expired",
        }
    return responses
