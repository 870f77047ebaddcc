"""Alembic environment: the URL comes from CARDCAT_DATABASE_URL (or the embedded SQLite default)."""

from __future__ import annotations

from alembic import context

# Every module that declares tables, so the metadata holds the whole schema.
from catalog_api.access import tables as access_tables  # noqa: F401
from catalog_api.batches import tables as batches_tables  # noqa: F401
from catalog_api.events import tables as events_tables  # noqa: F401
from catalog_api.kit import models  # noqa: F401
from catalog_api.kit.db import Base, make_engine
from catalog_api.kit.settings import get_settings
from catalog_api.prices import tables as prices_tables  # noqa: F401

config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(get_settings())
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations()
