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
    _encrypt_plain_webhook_secrets()


def _encrypt_plain_webhook_secrets() -> None:
    """Webhook secrets an older version stored in plain text are encrypted now (the deliverer would do
    it when it starts). The key is only needed, and so only created, when there is one to encrypt."""
    from sqlalchemy import not_, select

    from catalog_api.events.endpoints import reseal_secrets
    from catalog_api.events.secret_box import PREFIX, webhook_box
    from catalog_api.events.tables import WebhookEndpoint
    from catalog_api.kit.db import make_engine
    from catalog_api.kit.secret_store import SecretStoreError
    from catalog_api.kit.settings import get_settings

    settings = get_settings()
    engine = make_engine(settings)
    try:
        with engine.connect() as conn:
            plain = conn.execute(
                select(WebhookEndpoint.id).where(not_(WebhookEndpoint.secret.startswith(PREFIX))).limit(1)
            ).first()
        if plain is None:
            return
        try:
            box = webhook_box(settings)
        except (SecretStoreError, ValueError) as exc:
            click.echo(
                f"webhook secrets left in plain text ({exc}); set the key, then `cardcat webhooks rekey`",
                err=True,
            )
            return
        click.echo(f"encrypted {reseal_secrets(engine, box).changed} webhook secrets")
    finally:
        engine.dispose()


@db.command("check")
def db_check() -> None:
    """Fail when the models and the migrations disagree."""
    from catalog_api import migrate

    migrate.check()
    click.echo("models and migrations agree")
