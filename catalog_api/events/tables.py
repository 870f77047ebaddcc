"""The events room's tables: an outbox. Events are rows written in the same transaction as the change that
caused them, and each active webhook endpoint gets a delivery row beside it: a crash can neither lose
nor invent an event."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from catalog_api.kit.db import Base


class Event(Base):
    __tablename__ = "events"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The delivery body exactly as sent (and signed): JSON text.
    body: Mapped[str] = mapped_column(Text)

    __table_args__ = ({"sqlite_autoincrement": True},)


class WebhookEndpoint(Base):
    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_reason: Mapped[str | None] = mapped_column(Text)

    __table_args__ = ({"sqlite_autoincrement": True},)


class Delivery(Base):
    """One event owed to one endpoint: pending until a 2xx, retried with backoff until then."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_seq: Mapped[int] = mapped_column(ForeignKey("events.seq", ondelete="CASCADE"))
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        UniqueConstraint("event_seq", "endpoint_id", name="uq_deliveries_event_endpoint"),
        Index("ix_deliveries_due", "delivered_at", "next_attempt_at"),
        # Each endpoint's oldest undelivered event: a range of the pending rows, never the delivered history.
        Index("ix_deliveries_pending", "delivered_at", "endpoint_id", "event_seq"),
    )
