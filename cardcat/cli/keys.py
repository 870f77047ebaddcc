"""`cardcat keys`: API keys, created (shown once), revoked and listed."""

from __future__ import annotations

import sys

import click

from catalog_api.kit.settings import get_settings


@click.group()
def keys() -> None:
    """API keys (shown once, stored hashed)."""


@keys.command("create")
@click.option("--name", required=True)
@click.option("--expires-in", type=click.IntRange(min=1), default=None, help="Lifetime in seconds.")
def keys_create(name: str, expires_in: int | None) -> None:
    """Create a key; the key itself is the last line of output."""
    from catalog_api.access.keys import create_key
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    key, info = create_key(engine, name, expires_in)
    engine.dispose()
    expiry = info.expires_at.isoformat() if info.expires_at else "never"
    click.echo(f"created key {info.prefix}… named {info.name!r}, expires {expiry}; it is shown only once:")
    click.echo(key)


@keys.command("revoke")
@click.argument("key")
def keys_revoke(key: str) -> None:
    """Revoke a key, given in full or by the prefix `keys list` shows."""
    from catalog_api.access.keys import revoke_key
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    count = revoke_key(engine, key)
    engine.dispose()
    if count == 0:
        click.echo("no active key matched", err=True)
        sys.exit(1)
    click.echo(f"revoked {count} key(s)")


@keys.command("list")
def keys_list() -> None:
    """Every key: id, prefix, name, status, created, expires."""
    from catalog_api.access.keys import list_keys
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    for info in list_keys(engine):
        expires = info.expires_at.isoformat() if info.expires_at else "-"
        click.echo(
            f"{info.id}\t{info.prefix}\t{info.name}\t{info.status}\t{info.created_at.isoformat()}\t{expires}"
        )
    engine.dispose()
