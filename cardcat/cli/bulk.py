"""`cardcat bulk`: the bulk files (`GET /v1/bulk`); the syncs and `serve` refresh them through here."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import click

from catalog_api.kit.settings import Settings, get_settings

log = logging.getLogger("cardcat")


def refresh_bulk(settings: Settings, force: bool = False) -> dict[str, Any]:
    """Rebuild the bulk files if the feeds moved since the last build; the build's summary."""
    from catalog_api.catalog.bulk_files import refresh
    from catalog_api.kit.db import make_async_engine

    async def run() -> dict[str, Any]:
        engine = make_async_engine(settings)
        try:
            return (await refresh(engine, settings, force)).summary()
        finally:
            await engine.dispose()

    return asyncio.run(run())


def refresh_bulk_in_background(settings: Settings) -> threading.Thread:
    """For `serve`: a deployment whose files predate this version (or were never built) gets them
    without delaying start-up; usually the files are current and this is one query."""

    def run() -> None:
        try:
            refresh_bulk(settings)
        except Exception:  # a missing table (not migrated yet) must not take the server down
            log.exception("bulk files not refreshed")

    thread = threading.Thread(target=run, name="bulk-refresh", daemon=True)
    thread.start()
    return thread


@click.group()
def bulk() -> None:
    """The bulk files: the whole catalog, one .ndjson.gz per kind."""


@bulk.command("build")
@click.option("--force", is_flag=True, help="Rebuild even when the feeds have not changed.")
def bulk_build(force: bool) -> None:
    """Build the bulk files now (the syncs do it themselves after any change); prints a JSON summary."""
    click.echo(json.dumps(refresh_bulk(get_settings(), force)))
