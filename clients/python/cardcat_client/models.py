"""Typed models of every payload the cardcat API serves (the `data` of its `{data, error}` envelope).

They mirror the server's `/openapi.json`: `tests/clients/test_models_match_openapi.py` walks from each
route the client wraps to the schema the server declares for it and compares fields, which are required,
and their types. Unknown keys are ignored (the spec: adding a field is not breaking), so an older client
keeps reading a newer server. Dates arrive as `YYYY-MM-DD` and become `datetime.date`; timestamps become
`datetime.datetime`.
"""

from __future__ import annotations

import datetime as _dt
from datetime import date, datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class Model(BaseModel):
    """Base of every payload: ignores keys it does not know, and is immutable (models are shared by
    the ETag cache's re-reads, never edited)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Page(Model, Generic[T]):
    """One page of a list; pass `next_cursor` as `cursor` for the next one (null on the last)."""

    items: list[T]
    next_cursor: str | None


class ErrorBody(Model):
    code: str
    message: str


class Image(Model):
    low: str
    high: str


class Price(Model):
    """A current price of one printing in one condition, in US cents."""

    condition: str
    currency: Literal["USD"]
    market: int | None
    low: int | None
    high: int | None
    listing_count: int | None
    observed_on: date


class ProductPrice(Price):
    variant: str


class Variant(Model):
    """One printing of a card."""

    id: int
    type: str
    subtype: str | None
    size: str | None
    stamps: list[str]
    foil: str | None
    marketplace: list[Price]


class Ability(Model):
    kind: str
    name: str
    text: str | None


class Attack(Model):
    name: str
    cost: list[str] | None
    damage: str | None
    text: str | None


class Modifier(Model):
    type: str
    modifier: str | None


class Legality(Model):
    standard: bool
    expanded: bool


class Metadata(Model):
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


class Change(Model):
    """How the headline printing's market price moved over one window."""

    window: Literal["1d", "7d", "30d"]
    card_variant_id: int
    printing: str
    start_cents: int
    end_cents: int
    change_cents: int
    change_bp: int
    start_as_of: date
    observed_on: date


class CardSummary(Model):
    """A row of `GET /v1/cards` and `GET /v1/movers`. The last fields are present only on request
    (`include=variants,metadata,change`, `q`); they are None when the server left them out."""

    id: str
    expansion_id: str
    number: str | None
    name: str
    rarity: str | None
    illustrator: str | None
    image: Image | None
    palette: list[str] | None
    category: str | None
    number_normalized: str | None
    variants: list[Variant] | None = None
    metadata: Metadata | None = None
    change: list[Change] | None = None
    score: float | None = None
    names: dict[str, str] | None = None  # with include=names


class Card(Model):
    """`GET /v1/cards/{id}`: the full card."""

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
    names: dict[str, str] | None = None  # with include=names


class Expansion(Model):
    id: str
    series_id: str
    name: str
    logo: Image | None
    symbol: str | None
    palette: list[str] | None
    release_date: date
    card_count_total: int
    card_count_official: int
    legal_standard: bool
    legal_expanded: bool
    score: float | None = None
    names: dict[str, str] | None = None  # with include=names


class SeriesExpansion(Model):
    id: str
    name: str
    logo: Image | None
    symbol: str | None
    palette: list[str] | None
    release_date: date
    card_count_total: int


class Series(Model):
    id: str
    name: str
    logo: Image | None
    palette: list[str] | None
    expansions: list[SeriesExpansion]
    score: float | None = None
    names: dict[str, str] | None = None  # with include=names


class ProductExpansion(Model):
    id: str
    name: str


class Product(Model):
    """A sealed product (booster box, tin, …) with its current prices."""

    id: int
    name: str
    clean_name: str
    number: str | None
    image: Image | None
    marketplace_url: str
    expansions: list[ProductExpansion]
    marketplace: list[ProductPrice]
    score: float | None = None
    names: dict[str, str] | None = None  # with include=names


class FeedHealth(Model):
    status: str
    synced_at: datetime | None
    observed_on: date | None


class Health(Model):
    """`GET /health`: `degraded` when some part of the catalog is staler than it should be."""

    status: Literal["ok", "degraded"]
    feeds: dict[str, FeedHealth]
    last_updated: datetime | None


class ScanExpansion(Model):
    id: str
    name: str


class ScanCard(Model):
    id: str
    name: str
    category: str | None
    rarity: str | None
    number: str | None
    image: Image | None
    expansion: ScanExpansion


class ScanMatch(Model):
    score: float
    card: ScanCard


class ScanAnalysis(Model):
    game: str | None
    # How far to trust the answer: `certain`, `likely` or `review` (a race, or no card).
    tier: Literal["certain", "likely", "review"]
    # How the card was found: `quick` (the scanner's first look alone) or `full`; the same card either way.
    path: Literal["quick", "full"] = "full"


class Unidentified(Model):
    reason: Literal["print_unreadable", "no_confident_match"]
    message: str


class ScanResult(Model):
    """`POST /v1/scan`: one match when confident, up to five in a close race, or none and `unidentified`."""

    analysis: ScanAnalysis
    matches: list[ScanMatch]
    unidentified: Unidentified | None


class PageUnidentified(Model):
    # As a single scan's, and `card_back` (a card face down) or `empty_slot` (a pocket with no card).
    reason: Literal["print_unreadable", "no_confident_match", "card_back", "empty_slot"]
    message: str


class PageSlot(Model):
    row: int
    col: int


class PageCard(Model):
    """One card of a page: its corners (`[x, y]` photo px, clockwise from its top-left), its pocket on a
    binder page, and what a single scan of it answers."""

    corners: list[list[float]]
    slot: PageSlot | None = None
    analysis: ScanAnalysis
    matches: list[ScanMatch]
    unidentified: PageUnidentified | None


class PageGrid(Model):
    rows: int
    cols: int


class PageResult(Model):
    """`POST /v1/scan/page`: every card in the photo in reading order (`grid`: by pocket, empty pockets
    included), at most 24 (`truncated` when there were more)."""

    cards: list[PageCard]
    layout: Literal["grid", "free"]
    grid: PageGrid | None
    truncated: bool


class BatchPhotos(Model):
    total: int
    answered: int
    waiting: int


class BatchOutcomes(Model):
    match: int
    race: int
    print_unreadable: int
    no_confident_match: int
    error: int


class BatchTiers(Model):
    certain: int
    likely: int
    review: int


class Batch(Model):
    """A scan batch (`/v1/scan/batches`): `status` is open, queued, running, done, cancelled or expired."""

    id: str
    status: Literal["open", "queued", "running", "done", "cancelled", "expired"]
    page: bool
    events: Literal["batch", "per_photo"]
    photos: BatchPhotos
    outcomes: BatchOutcomes
    tiers: BatchTiers
    progress: float
    created_at: datetime
    closed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    expires_at: datetime

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "expired")


class BatchResult(ScanResult):
    """One photo's answer in a batch: a scan answer, the photo's place and name, and `error` when it
    could not be scanned."""

    index: int
    name: str
    url: str | None
    error: ErrorBody | None


class WebhookEvent(Model):
    """A webhook delivery body (not enveloped): `data` is the payload of the event `name`."""

    id: str
    name: str
    created_at: datetime
    data: dict[str, Any]
    chunk: dict[str, int] | None = None


class PricePoint(Model):
    """One calendar day: the last feed row on or before `date` (its own date is `observed_on`)."""

    date: _dt.date
    market: int | None
    low: int | None
    high: int | None
    listing_count: int | None
    observed_on: _dt.date


class CardPriceHistory(Model):
    """`GET /v1/cards/{id}/prices`: one point per day for one printing and condition."""

    card_id: str
    variant_id: int | None  # null only when the card has no printing
    condition: str
    currency: Literal["USD"]
    points: list[PricePoint]


class ProductPriceHistory(Model):
    """`GET /v1/products/{id}/prices`: one point per day for one product variant and condition."""

    product_id: int
    variant: str | None  # null when the product was never priced
    condition: str
    currency: Literal["USD"]
    points: list[PricePoint]


class BulkFile(Model):
    """An entry of `GET /v1/bulk`: a `.ndjson.gz` of every record of one kind, at a signed URL."""

    kind: str
    url: str
    sha256: str
    bytes: int
    rows: int
    generated_at: datetime
