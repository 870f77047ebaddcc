"""Wire shapes of `POST /v1/scan`, for OpenAPI and the tests (the scanner's own answer to the ingress
is the typed contract in `core.scan_contract`, whose "unidentified" reasons these reuse)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catalog_api.kit.schemas import Image, Strict
from core.scan_contract import PAGE_CARDS, PageUnidentifiedReason, ScanPath, Tier, UnidentifiedReason


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
    tier: Tier = Field(
        description="How far to trust the answer: `certain` (one card, backed by its printed number or by "
        "a picture the scanner is sure of: straight to inventory), `likely` (one card, right nearly "
        "always), `review` (a race of several cards, or none: for a person). Measured precision per tier: "
        "docs/scanner.md."
    )
    path: ScanPath = Field(
        "full",
        description="How the card was found: `quick` (the detector's first, whole-photo look alone, kept "
        "only when the picture is certain of a card whose artwork has no reprint) or `full` (the full "
        "pipeline). The same card either way; `quick` costs the server less (docs/scanner.md).",
    )


class Unidentified(Strict):
    reason: UnidentifiedReason
    message: str


class ScanResult(Strict):
    analysis: ScanAnalysis
    matches: list[ScanMatch] = Field(max_length=5, description="Best first: one when confident, up to five.")
    unidentified: Unidentified | None


class PageUnidentified(Strict):
    reason: PageUnidentifiedReason = Field(
        description="As `POST /v1/scan`'s, and two of this endpoint's own: `card_back` (a card lying face "
        "down) and `empty_slot` (a pocket of the page with no card found in it)."
    )
    message: str


class PageSlot(Strict):
    row: int = Field(ge=1, description="The pocket's row, counted from 1 at the top of the photo.")
    col: int = Field(ge=1, description="The pocket's column, counted from 1 at the left of the photo.")


class PageCard(Strict):
    corners: list[list[float]] = Field(
        min_length=4,
        max_length=4,
        description="The card's four corners as `[x, y]` in the photo's pixels (after its EXIF rotation), "
        "clockwise from the card's own top-left.",
    )
    slot: PageSlot | None = Field(None, description="Its pocket, when `layout` is `grid`; else null.")
    analysis: ScanAnalysis
    matches: list[ScanMatch] = Field(max_length=5, description="As a single scan of this card answers.")
    unidentified: PageUnidentified | None


class PageGrid(Strict):
    rows: int = Field(ge=1)
    cols: int = Field(ge=1)


class PageResult(Strict):
    cards: list[PageCard] = Field(
        max_length=2 * PAGE_CARDS,
        description=f"Every card found, in reading order (rows top to bottom, then left to right; on a grid, "
        f"by pocket), and on a grid every pocket with no card found (`empty_slot`). At most {PAGE_CARDS} "
        "cards: a photo of more lists the largest.",
    )
    layout: Literal["grid", "free"] = Field(
        description="`grid`: a binder page, whose pockets the cards' `slot`s name; `free`: cards lying "
        "anywhere."
    )
    grid: PageGrid | None = Field(description="The pocket grid's size when `layout` is `grid`; else null.")
    truncated: bool = Field(description=f"More than {PAGE_CARDS} cards were found; the largest are listed.")
