"""batch photo tiers

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-06 09:20:00.000000

Each answered batch photo keeps its answer's confidence tier (`analysis.tier`, #44 item 4), so a batch
counts its photos by tier as it does by outcome.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scan_batch_photos") as batch:
        batch.add_column(sa.Column("tier", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scan_batch_photos") as batch:
        batch.drop_column("tier")
