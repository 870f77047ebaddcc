"""The prices room's own tables: the quote log, the files loaded, the movers and the published snapshots.

The current quotes other rooms read (`card_prices_current`, `product_prices*`) are in `kit/models.py`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from catalog_api.kit.db import Base, IdString
from catalog_api.kit.models import Quote


class CardPrice(Quote, Base):
    # Keyed by day first: a day's rows append at the right edge of the index instead of landing all over
    # a 200 MB B-tree (the bulk load's bottleneck once the log outgrows the buffer cache).
    __tablename__ = "card_prices"

    observed_on: Mapped[str] = mapped_column(String(10), primary_key=True)
    variant_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    condition: Mapped[str] = mapped_column(String(8), primary_key=True)


class PriceFile(Base):
    """Each daily feed file loaded, by digest: the same file again is skipped, a changed one reloaded."""

    __tablename__ = "price_files"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    rows: Mapped[int] = mapped_column(Integer)
    loaded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CardMover(Base):
    """One computed window of a card's headline printing (see catalog_api/prices/movers.py)."""

    __tablename__ = "card_movers"

    card_id: Mapped[str] = mapped_column(
        IdString, ForeignKey("cards.id", ondelete="CASCADE"), primary_key=True
    )
    window: Mapped[str] = mapped_column(String(4), primary_key=True)
    card_variant_id: Mapped[int] = mapped_column(Integer)
    printing: Mapped[str] = mapped_column(Text)
    start_cents: Mapped[int] = mapped_column(Integer)
    end_cents: Mapped[int] = mapped_column(Integer)
    change_cents: Mapped[int] = mapped_column(Integer)
    change_bp: Mapped[int] = mapped_column(Integer)
    start_as_of: Mapped[str] = mapped_column(String(10))
    observed_on: Mapped[str] = mapped_column(String(10))
    # Leaderboard positions within the window (1 = biggest rise / fall; null when the card did not move
    # that way), computed when the table is rewritten so a page is one index range scan.
    expansion_id: Mapped[str] = mapped_column(IdString)
    gain_rank: Mapped[int | None] = mapped_column(Integer)
    loss_rank: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        Index("ix_card_movers_gainers", "window", "gain_rank"),
        Index("ix_card_movers_losers", "window", "loss_rank"),
        Index("ix_card_movers_expansion_gainers", "window", "expansion_id", "gain_rank"),
        Index("ix_card_movers_expansion_losers", "window", "expansion_id", "loss_rank"),
    )


class PriceSnapshot(Base):
    """A published daily price file (`card_prices` or `product_prices`), as announced by its event."""

    __tablename__ = "price_snapshots"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    snapshot_date: Mapped[str] = mapped_column(String(10), primary_key=True)
    file_name: Mapped[str] = mapped_column(Text)
    rows: Mapped[int] = mapped_column(Integer)
    subjects: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    bytes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
