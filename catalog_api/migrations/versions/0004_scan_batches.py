"""scan batches

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06 06:36:50.519196

The batches room's tables (#44): batches, their photos (lease and answer each), and the replies kept
for `Idempotency-Key` retries.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
ID = sa.String().with_variant(sa.String(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "idempotent_replies",
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("body", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("key_id", "idempotency_key"),
    )
    with op.batch_alter_table("idempotent_replies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_idempotent_replies_created_at"), ["created_at"], unique=False)

    op.create_table(
        "scan_batches",
        sa.Column("id", ID, nullable=False),
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("page", sa.Boolean(), nullable=False),
        sa.Column("events", sa.String(length=16), nullable=False),
        sa.Column("photo_count", sa.Integer(), nullable=False),
        sa.Column("answered", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("served_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("scan_batches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scan_batches_key_id"), ["key_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_scan_batches_status"), ["status"], unique=False)

    op.create_table(
        "scan_batch_photos",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("lease_owner", sa.String(length=80), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("answer", JSON, nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["scan_batches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("batch_id", "position"),
    )
    with op.batch_alter_table("scan_batch_photos", schema=None) as batch_op:
        batch_op.create_index("ix_scan_batch_photos_answers", ["batch_id", "sequence"], unique=False)
        batch_op.create_index("ix_scan_batch_photos_claim", ["batch_id", "state", "position"], unique=False)


def downgrade() -> None:
    op.drop_table("scan_batch_photos")
    op.drop_table("scan_batches")
    op.drop_table("idempotent_replies")
