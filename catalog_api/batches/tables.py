"""The batches room's tables: the batches, their photos (each one's lease and answer), and the replies
kept for `Idempotency-Key` retries."""

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


class ScanBatch(Base):
    """One job. `status`: open (taking photos), queued (closed, none scanned yet), running, done,
    cancelled, expired. `answered` counts the photos answered so far and numbers each answer
    (`BatchPhoto.sequence`), so results page in the order they were answered and a client polling them
    never misses or repeats one. `served_at` is when a worker last took photos from it: workers take the
    batch served longest ago, so batches (and keys) share the scanner round-robin."""

    __tablename__ = "scan_batches"

    id: Mapped[str] = mapped_column(IdString, primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    page: Mapped[bool] = mapped_column(Boolean, default=False)
    # "per_photo": a `cardgame.scan.result` event for each answer; "batch": only the batch's own events.
    events: Mapped[str] = mapped_column(String(16), default="batch")
    photo_count: Mapped[int] = mapped_column(Integer, default=0)
    answered: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    served_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class BatchPhoto(Base):
    """One photo of a batch: where it is until scanned (a file in the data dir, or a URL fetched when
    its turn comes), its lease while a worker scans it, and then its answer. `state`: pending, leased,
    done, cancelled, expired. An answer is written only by the worker whose lease it is, in the
    transaction that ends the lease, so a photo is answered exactly once whoever crashed."""

    __tablename__ = "scan_batch_photos"
    __table_args__ = (
        UniqueConstraint("batch_id", "position"),
        Index("ix_scan_batch_photos_claim", "batch_id", "state", "position"),
        Index("ix_scan_batch_photos_answers", "batch_id", "sequence"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("scan_batches.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    url: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    lease_owner: Mapped[str | None] = mapped_column(String(80))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    sequence: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str | None] = mapped_column(String(32))
    tier: Mapped[str | None] = mapped_column(String(16))  # the answer's `analysis.tier`
    answer: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    answered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class IdempotentReply(Base):
    """The answer given to a POST that carried `Idempotency-Key`, replayed when the same key sends the
    same request again (`fingerprint`: method, path and body digest); kept as long as batches are."""

    __tablename__ = "idempotent_replies"

    key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
