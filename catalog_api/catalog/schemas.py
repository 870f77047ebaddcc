"""Wire shapes of the catalog reads (cards, series, expansions, products), for OpenAPI and the tests."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from catalog_api.kit.schemas import Image, Price, ProductPrice, Strict


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
    names: dict[str, str] | None = Field(
        None, description="Only with include=names: language -> name, every language the feed carries."
    )
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
    names: dict[str, str] | None = Field(
        None, description="Only with include=names: language -> name, every language the feed carries."
    )


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
    names: dict[str, str] | None = Field(
        None, description="Only with include=names: language -> name, every language the feed carries."
    )
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
    names: dict[str, str] | None = Field(
        None, description="Only with include=names: language -> name, every language the feed carries."
    )
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
    names: dict[str, str] | None = Field(
        None, description="Only with include=names: language -> name, every language the feed carries."
    )
    score: float | None = Field(None, ge=0, le=1, description="Only when q is set.")
