"""card and expansion names in every language

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 07:00:00.000000

The columns start empty: the next `cardcat catalog sync` fills them (a card's `names` sits beside its
content hash, so a database synced before this revision gets them without any `cards.updated` event;
an expansion's `names` is a field no served record carries, so it is written quietly too).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.add_column("cards", sa.Column("names", JSON, nullable=True))
    op.add_column("expansions", sa.Column("names", JSON, nullable=True))


def downgrade() -> None:
    op.drop_column("expansions", "names")
    op.drop_column("cards", "names")
