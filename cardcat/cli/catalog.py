"""`cardcat catalog` and `cardcat index`: load the catalog feed, and keep the scanner's index of its faces.

A sync refreshes the scanner's index for the cards it changed, so this command group reaches into
`serve_app` (allowed here: the CLI is the composition root)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from cardcat.cli.bulk import refresh_bulk
from catalog_api.kit.settings import get_settings


@click.group()
def catalog() -> None:
    """The upstream catalog feed."""


@catalog.command("sync")
@click.option(
    "--from", "source", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--images", type=click.Path(exists=True, file_okay=False, path_type=Path), help="cardrender output"
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def catalog_sync(source: Path, images: Path | None, quiet: bool) -> None:
    """Load a catalog feed folder (idempotent, incremental)."""
    from catalog_api.ingest.catalog_sync import sync_catalog
    from catalog_api.kit.db import make_engine
    from catalog_api.kit.images import ImageStore

    settings = get_settings()
    engine = make_engine(settings)
    started = time.perf_counter()
    report = sync_catalog(engine, source, ImageStore(settings.images_dir), images, progress=not quiet)
    summary: dict[str, Any] = {**report.summary(), "seconds": round(time.perf_counter() - started, 2)}
    if (settings.index_dir / "meta.json").exists() and images is not None:
        # Keep the scanner's index current: re-embed the cards this sync created or changed.
        from catalog_api.scan.indexing import refresh_index

        summary["index_refreshed"] = refresh_index(
            settings, engine, report.cards_created + report.cards_updated
        )
    engine.dispose()
    summary["bulk"] = refresh_bulk(settings)
    click.echo(json.dumps(summary))


@catalog.command("demo-feed")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def catalog_demo_feed(out: Path) -> None:
    """Write the project's small synthetic sample catalog (feed format) to OUT."""
    from catalog_api.ingest.demo_catalog import write_demo_catalog

    click.echo(str(write_demo_catalog(out)))


@click.group()
def index() -> None:
    """The scanner's FAISS index of catalog card faces."""


@index.command("build")
@click.option(
    "--weights", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="embedder weights"
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def index_build(weights: Path | None, quiet: bool) -> None:
    """Embed every hosted card face (batched, resumable) and swap the new index in."""
    from catalog_api.kit.db import make_engine
    from catalog_api.scan.indexing import build_index

    settings = get_settings()
    engine = make_engine(settings)
    started = time.perf_counter()
    count = build_index(settings, engine, weights, progress=not quiet)
    engine.dispose()
    click.echo(json.dumps({"cards": count, "seconds": round(time.perf_counter() - started, 2)}))
