"""`cardcat batches`: the operator's view of scan batches (docs/batches.md): list, show, cancel."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from catalog_api.kit.settings import get_settings

T = TypeVar("T")


def _run(work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(engine)` on an async engine of the configured database, disposed afterwards."""
    from catalog_api.kit.db import make_async_engine

    async def main() -> T:
        engine = make_async_engine(get_settings())
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())


@click.group()
def batches() -> None:
    """Scan batches of every key: list, show, cancel."""


@batches.command("list")
@click.option("--status", type=click.Choice(["open", "queued", "running", "done", "cancelled", "expired"]))
@click.option("--limit", type=click.IntRange(min=1, max=10_000), default=50, show_default=True)
def batches_list(status: str | None, limit: int) -> None:
    """The newest batches: id, key prefix, status, answered/total photos, created."""
    from catalog_api.batches import queue

    async def work(engine: Any) -> list[Any]:
        async with engine.connect() as conn:
            return await queue.list_batches(conn, status, limit)

    for batch in _run(work):
        created = queue.as_utc(batch.created_at).isoformat()
        click.echo(
            f"{batch.id}\t{batch.prefix}\t{batch.status}\t{batch.answered}/{batch.photo_count}\t{created}"
        )


@batches.command("show")
@click.argument("batch_id")
def batches_show(batch_id: str) -> None:
    """One batch as the API shows it (JSON)."""
    from catalog_api.batches import queue
    from core.errors import NotFound

    async def work(engine: Any) -> dict[str, Any]:
        async with engine.connect() as conn:
            await queue.any_batch(conn, batch_id)
            return await queue.describe(conn, batch_id)

    try:
        click.echo(json.dumps(_run(work), indent=2))
    except NotFound as error:
        click.echo(error.message, err=True)
        sys.exit(1)


@batches.command("cancel")
@click.argument("batch_id")
def batches_cancel(batch_id: str) -> None:
    """Cancel an unfinished batch of any key: its waiting photos are deleted, its answers kept."""
    from catalog_api.batches import photo_files, queue
    from core.errors import NotFound

    async def work(engine: Any) -> bool:
        async with engine.begin() as conn:
            return await queue.cancel_batch(conn, await queue.any_batch(conn, batch_id, lock=True))

    try:
        cancelled = _run(work)
    except NotFound as error:
        click.echo(error.message, err=True)
        sys.exit(1)
    if cancelled:
        photo_files.remove_batch(get_settings(), batch_id)
    click.echo(f"{batch_id}: {'cancelled' if cancelled else 'already finished; nothing changed'}")
