"""The tables more than one room reads: the catalog (series, expansions, cards, printings, products), the
feeds' state and the current quotes. A table only one room reads lives in that room (`access/tables.py`,
`prices/tables.py`, `events/tables.py`). Alembic migrations (catalog_api/migrations) are generated from
all of them (`catalog_api.migrations.env` imports every module)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from catalog_api.kit.db import Base, IdString, JSONType


class Series(Base):
    __tablename__ = "series"

    id: Mapped[str] = mapped_column(IdString, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    names: Mapped[dict[str, str] | None] = mapped_column(JSONType)
    first_release_date: Mapped[str | None] = mapped_column(String(10))
    logo_url: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))


class Expansion(Base):
    __tablename__ = "expansions"

    id: Mapped[str] = mapped_column(IdString, primary_key=True)
    series_id: Mapped[str] = mapped_column(IdString, index=True)
    name: Mapped[str] = mapped_column(Text)
    # Every language's name the feed carries (language -> name), for `lang`, `include=names` and search.
    names: Mapped[dict[str, str] | None] = mapped_column(JSONType)
    code: Mapped[str | None] = mapped_column(Text)
    ptcgo_code: Mapped[str | None] = mapped_column(Text)
    abbreviations: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    release_date: Mapped[str] = mapped_column(String(10))
    card_count_total: Mapped[int] = mapped_column(Integer)
    card_count_official: Mapped[int] = mapped_column(Integer)
    legal_standard: Mapped[bool] = mapped_column(Boolean)
    legal_expanded: Mapped[bool] = mapped_column(Boolean)
    logo_url: Mapped[str | None] = mapped_column(Text)
    symbol_url: Mapped[str | None] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))


class Card(Base):
    __tablename__ = "cards"

    id: Mapped[str] = mapped_column(IdString, primary_key=True)
    expansion_id: Mapped[str] = mapped_column(IdString)
    number: Mapped[str | None] = mapped_column(Text)
    number_normalized: Mapped[str | None] = mapped_column(Text, index=True)
    name: Mapped[str] = mapped_column(Text)
    # Every language's name the feed carries (language -> name). Outside the content hash: a card whose
    # only change is another language's name is rewritten quietly (no served record changed).
    names: Mapped[dict[str, str] | None] = mapped_column(JSONType)
    rarity: Mapped[str | None] = mapped_column(Text)
    illustrator: Mapped[str | None] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(Text)
    card_metadata: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSONType)
    image_key: Mapped[str | None] = mapped_column(String(64))
    palette: Mapped[list[str] | None] = mapped_column(JSONType)
    # Catalog order, denormalised so a page is one index range scan: expansion release date, expansion
    # id, numeric numbers before non-numeric ones, the number's value, then the card id.
    sort_release: Mapped[str] = mapped_column(String(10))
    sort_nonnumeric: Mapped[int] = mapped_column(Integer)
    sort_number: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (
        Index(
            "ix_cards_catalog_order", "sort_release", "expansion_id", "sort_nonnumeric", "sort_number", "id"
        ),
        Index("ix_cards_expansion_order", "expansion_id", "sort_nonnumeric", "sort_number", "id"),
    )


class CardVariant(Base):
    """One printing. Its integer id lives as long as the printing's five fields stay the same."""

    __tablename__ = "card_variants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    card_id: Mapped[str] = mapped_column(IdString, ForeignKey("cards.id", ondelete="CASCADE"), index=True)
    printing_key: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(Text)
    subtype: Mapped[str | None] = mapped_column(Text)
    size: Mapped[str | None] = mapped_column(Text)
    stamps: Mapped[list[str]] = mapped_column(JSONType)
    foil: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("card_id", "printing_key", name="uq_card_variants_printing"),
        # Never hand a deleted printing's id to a new one (SQLite would reuse the highest id).
        {"sqlite_autoincrement": True},
    )


class Product(Base):
    __tablename__ = "products"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(Text)
    clean_name: Mapped[str] = mapped_column(Text)
    number: Mapped[str | None] = mapped_column(Text)
    image_url: Mapped[str | None] = mapped_column(Text)
    marketplace_url: Mapped[str] = mapped_column(Text)
    expansions: Mapped[list[dict[str, str]]] = mapped_column(JSONType)
    msrp_cents: Mapped[int | None] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))


class ProductExpansion(Base):
    """Which expansions a product is listed under, for the `expansion_id` filter."""

    __tablename__ = "product_expansions"

    product_id: Mapped[int] = mapped_column(ForeignKey("products.id", ondelete="CASCADE"), primary_key=True)
    expansion_id: Mapped[str] = mapped_column(IdString, primary_key=True, index=True)


class FeedState(Base):
    """One row per upstream feed: when it last synced and the newest observation it holds."""

    __tablename__ = "feed_state"

    feed: Mapped[str] = mapped_column(String(32), primary_key=True)
    synced_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    observed_on: Mapped[str | None] = mapped_column(String(10))
    version: Mapped[int] = mapped_column(Integer, default=0)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSONType)


# --- prices -----------------------------------------------------------------------------------------
# The marketplace feed is a change log, and so is what we keep: one row per printing (or product), condition
# and day its quote changed. `*_current` holds each key's latest quote, so reads never scan the log.
# Card price rows carry no foreign key (a per-row check costs a third of the bulk load): every read
# joins `card_variants`, so the prices of a deleted printing are simply never served again.


class Quote:
    """A price quote's values (integer cents; `listing_count` capped at 25), shared by the price tables."""

    market: Mapped[int | None] = mapped_column(Integer)
    low: Mapped[int | None] = mapped_column(Integer)
    high: Mapped[int | None] = mapped_column(Integer)
    listing_count: Mapped[int | None] = mapped_column(Integer)


class CardPriceCurrent(Quote, Base):
    __tablename__ = "card_prices_current"

    variant_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    condition: Mapped[str] = mapped_column(String(8), primary_key=True)
    observed_on: Mapped[str] = mapped_column(String(10))


class ProductPrice(Quote, Base):
    __tablename__ = "product_prices"

    product_id: Mapped[int] = mapped_column(ForeignKey("products.id", ondelete="CASCADE"), primary_key=True)
    variant: Mapped[str] = mapped_column(Text, primary_key=True)
    condition: Mapped[str] = mapped_column(String(8), primary_key=True)
    observed_on: Mapped[str] = mapped_column(String(10), primary_key=True)


class ProductPriceCurrent(Quote, Base):
    __tablename__ = "product_prices_current"

    product_id: Mapped[int] = mapped_column(ForeignKey("products.id", ondelete="CASCADE"), primary_key=True)
    variant: Mapped[str] = mapped_column(Text, primary_key=True)
    condition: Mapped[str] = mapped_column(String(8), primary_key=True)
    observed_on: Mapped[str] = mapped_column(String(10))
