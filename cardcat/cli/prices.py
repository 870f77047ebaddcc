"""`cardcat prices`: load the marketplace price feed (movers and snapshot files follow it)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from cardcat.cli.bulk import refresh_bulk
from catalog_api.kit.settings import get_settings


@click.group()
def prices() -> None:
    """The upstream marketplace price feed."""


@prices.command("sync")
@click.option(
    "--from", "source", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def prices_sync(source: Path, quiet: bool) -> None:
    """Load the daily change log files under DIR/marketplace (bulk, streaming, idempotent)."""
    from catalog_api.kit.db import make_engine
    from catalog_api.prices.price_sync import FeedFileError, sync_prices

    settings = get_settings()
    engine = make_engine(settings)
    started = time.perf_counter()
    try:
        report = sync_prices(engine, source, settings, progress=not quiet)
    except FeedFileError as exc:
        raise click.ClickException(f"{exc}; nothing was loaded") from exc
    finally:
        engine.dispose()
    seconds = time.perf_counter() - started
    rows = report.card_rows + report.product_rows
    summary = {**report.summary(), "seconds": round(seconds, 2), "rows_per_s": round(rows / seconds)}
    summary["bulk"] = refresh_bulk(settings)
    click.echo(json.dumps(summary))
