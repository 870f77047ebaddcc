"""Wire shapes of `POST /v1/scan`, for OpenAPI and the tests (the scanner's own answer to the ingress
is the typed contract in `core.scan_contract`, whose "unidentified" reasons these reuse)."""

from __future__ import annotations

from pydantic import Field

from catalog_api.kit.schemas import Image, Strict
from core.scan_contract import ScanPath, Tier, UnidentifiedReason


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
