"""`cardcat db`: the database schema (Alembic), upgraded and checked against the ORM models."""

from __future__ import annotations

import click


@click.group()
def db() -> None:
    """Database schema (Alembic)."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply every migration."""
    from catalog_api import migrate

    migrate.upgrade()
    click.echo("database at head")


@db.command("check")
def db_check() -> None:
    """Fail when the models and the migrations disagree."""
    from catalog_api import migrate

    migrate.check()
    click.echo("models and migrations agree")
