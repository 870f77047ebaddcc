"""`cardcat`: the one command line for operators — database, catalog sync, keys, serving."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

from catalog_api.kit.settings import REPO_ROOT, get_settings

SHARED_CATALOG = REPO_ROOT.parent / "shared" / "catalog"


@click.group()
def main() -> None:
    """cardcat catalog API and scanner."""


@main.group()
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


@main.group()
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
    summary: dict[str, float] = {**report.summary(), "seconds": round(time.perf_counter() - started, 2)}
    if (settings.index_dir / "meta.json").exists() and images is not None:
        # Keep the scanner's index current: re-embed the cards this sync created or changed.
        from serve_app.indexing import refresh_index

        summary["index_refreshed"] = refresh_index(
            settings, engine, report.cards_created + report.cards_updated
        )
    engine.dispose()
    click.echo(json.dumps(summary))


@catalog.command("demo-feed")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
def catalog_demo_feed(out: Path) -> None:
    """Write the project's small synthetic sample catalog (feed format) to OUT."""
    from catalog_api.ingest.demo_catalog import write_demo_catalog

    click.echo(str(write_demo_catalog(out)))


@main.group()
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
    click.echo(json.dumps(summary))


@main.group()
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
    from serve_app.indexing import build_index

    settings = get_settings()
    engine = make_engine(settings)
    started = time.perf_counter()
    count = build_index(settings, engine, weights, progress=not quiet)
    engine.dispose()
    click.echo(json.dumps({"cards": count, "seconds": round(time.perf_counter() - started, 2)}))


@main.group()
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


@main.group()
def webhooks() -> None:
    """Webhook endpoints that receive the outbound events (signed, Standard Webhooks)."""


@webhooks.command("add")
@click.argument("url")
def webhooks_add(url: str) -> None:
    """Subscribe URL to every event from now on; the signing secret is the last line of output."""
    from catalog_api.events.endpoints import URLRefused, add_endpoint
    from catalog_api.kit.db import make_engine

    settings = get_settings()
    engine = make_engine(settings)
    try:
        endpoint_id, secret = add_endpoint(engine, url, settings.webhooks_allow_private)
    except URLRefused as exc:
        raise click.ClickException(f"refused {url}: {exc}") from None
    finally:
        engine.dispose()
    click.echo(f"added endpoint {endpoint_id} for {url}; its signing secret (verify `webhook-signature`):")
    click.echo(secret)


@webhooks.command("list")
def webhooks_list() -> None:
    """Every endpoint: id, url, status, created, events pending, events delivered."""
    from catalog_api.events.endpoints import list_endpoints
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    for info in list_endpoints(engine):
        click.echo(
            f"{info.id}\t{info.url}\t{info.status}\t{info.created_at.isoformat()}\t"
            f"pending={info.pending}\tdelivered={info.delivered}"
        )
    engine.dispose()


@webhooks.command("remove")
@click.argument("endpoint_id", type=int)
def webhooks_remove(endpoint_id: int) -> None:
    """Remove an endpoint and the deliveries it is still owed."""
    from catalog_api.events.endpoints import remove_endpoint
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    removed = remove_endpoint(engine, endpoint_id)
    engine.dispose()
    if not removed:
        raise click.ClickException(f"no endpoint {endpoint_id}")
    click.echo(f"removed endpoint {endpoint_id}")


@webhooks.command("enable")
@click.argument("endpoint_id", type=int)
def webhooks_enable(endpoint_id: int) -> None:
    """Re-enable a disabled endpoint; it resumes from its oldest undelivered event."""
    from catalog_api.events.endpoints import enable_endpoint
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    found = enable_endpoint(engine, endpoint_id)
    engine.dispose()
    if not found:
        raise click.ClickException(f"no endpoint {endpoint_id}")
    click.echo(f"enabled endpoint {endpoint_id}")


@main.group()
def events() -> None:
    """The event outbox."""


@events.command("deliver")
@click.option("--once", is_flag=True, help="Deliver what is due now, then exit.")
@click.option("--exit-with-parent", is_flag=True, hidden=True, help="Stop when the parent process ends.")
def events_deliver(once: bool, exit_with_parent: bool) -> None:
    """Send pending events to the webhook endpoints (the worker; `cardcat serve` runs one)."""
    import logging
    import os
    import signal
    import threading

    from catalog_api.events.deliverer import Deliverer
    from catalog_api.kit.db import make_engine

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = get_settings()
    engine = make_engine(settings)
    stop = threading.Event()
    # SIGTERM/SIGINT finish the post in flight, then exit; an unfinished one would be sent again anyway.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    counts = Deliverer(engine, settings).run(
        once=once, stop=stop, alive=lambda: not exit_with_parent or os.getppid() == parent
    )
    engine.dispose()
    click.echo(json.dumps(counts))


@events.command("prune")
@click.option("--older-than-days", type=click.IntRange(min=1), default=30, show_default=True)
def events_prune(older_than_days: int) -> None:
    """Delete delivered events older than this (run it daily); events still owed to an endpoint stay."""
    from datetime import timedelta

    from catalog_api.events.outbox import prune
    from catalog_api.kit.db import make_engine

    engine = make_engine(get_settings())
    pruned = prune(engine, timedelta(days=older_than_days))
    engine.dispose()
    click.echo(json.dumps({"pruned": pruned}))


def _start_deliverer() -> Any:
    """`cardcat events deliver` as a child of `serve` (one, whatever the number of uvicorn workers)."""
    import subprocess

    if not get_settings().deliver_events:
        return None
    command = [sys.executable, "-m", "catalog_api.cli", "events", "deliver", "--exit-with-parent"]
    return subprocess.Popen(command)


def _stop_deliverer(process: Any) -> None:
    """SIGTERM lets it finish the post in flight (at most the webhook timeout); then it is killed."""
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=get_settings().webhooks_timeout_s + 5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@main.command("serve")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
@click.option("--workers", default=1, type=int, help="uvicorn worker processes")
@click.option(
    "--scan/--no-scan",
    default=None,
    help="Start the Ray Serve scanner too (default: when the models and an index are present).",
)
def serve(host: str, port: int, workers: int, scan: bool | None) -> None:
    """Serve the API (uvicorn), and the scanner on Ray Serve behind it."""
    import os

    import uvicorn

    settings = get_settings()
    started_ray = False
    if scan is not False and not (settings.scan_url or settings.scan_app):
        from serve_app.config import ScanConfig, models_present

        config = ScanConfig(index_dir=str(settings.index_dir))
        missing = models_present(config)
        if missing and scan:
            raise click.ClickException(f"cannot start the scanner, missing: {', '.join(missing)}")
        if not missing:
            from serve_app.local import start_scanner

            app_name, ray_address = start_scanner(config, settings.scan_port or None)
            # uvicorn workers are processes of their own: they join this Ray instance by its address
            os.environ.update(CARDCAT_SCAN_APP=app_name, CARDCAT_RAY_ADDRESS=ray_address)
            get_settings.cache_clear()
            started_ray = True
        else:
            click.echo("scanner not started (no index yet: `cardcat index build`); serving the catalog only")
    deliverer = _start_deliverer()
    try:
        uvicorn.run(
            "catalog_api.app:create_app",
            factory=True,
            host=host,
            port=port,
            log_level="info",
            access_log=False,
            **_uvicorn_options(settings, workers),
        )
    finally:
        if deliverer is not None:
            _stop_deliverer(deliverer)
        if started_ray:
            from serve_app.local import stop_scanner

            stop_scanner()


DEMO_FACES = ("base1", "base4", "swsh10tg")  # reprints sharing artwork, and TG numbers


@main.command("demo")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
@click.option("--scan/--no-scan", default=True, help="Render a few expansions' faces and index them.")
@click.pass_context
def demo(ctx: click.Context, host: str, port: int, scan: bool) -> None:
    """Migrate, load the catalog (../shared/catalog, else the bundled sample) and a demo price feed,
    print a key, serve.

    With ../shared beside the checkout it also renders the faces of a few expansions, indexes them and
    starts the scanner, so `POST /v1/scan` works on photos of those cards."""
    settings = get_settings()
    ctx.invoke(db_upgrade)
    source = SHARED_CATALOG
    faces = None
    if not (source / "cards.jsonl.gz").exists():
        from catalog_api.ingest.demo_catalog import write_demo_catalog

        source = write_demo_catalog(settings.data_dir / "demo-catalog")
        click.echo(f"../shared/catalog not found; using the bundled sample catalog in {source}")
    elif scan:
        from training.renders import render_catalog

        faces = settings.data_dir / "demo-faces"
        click.echo(f"rendering the faces of {', '.join(DEMO_FACES)} for the scanner")
        render_catalog(source, faces, DEMO_FACES)
    ctx.invoke(catalog_sync, source=source, images=faces, quiet=False)
    if faces is not None:
        ctx.invoke(index_build, weights=None, quiet=False)
    from catalog_api.prices.demo_prices import write_demo_prices

    click.echo("writing a 31-day demo price feed ending today")
    ctx.invoke(prices_sync, source=write_demo_prices(source, settings.data_dir / "demo-prices"), quiet=False)
    ctx.invoke(keys_create, name="demo", expires_in=None)
    click.echo(f"serving on http://{host}:{port} (docs at /docs)")
    ctx.invoke(serve, host=host, port=port, workers=1, scan=None)


def _uvicorn_options(settings: Any, workers: int) -> dict[str, Any]:
    """uvicorn's proxy trust and worker count, from our settings.

    uvicorn believes X-Forwarded-For from 127.0.0.1 by default, which lets any client on loopback (or
    behind a local proxy that passes the header through) pick its own address and so its anonymous
    rate-limit bucket: trust only the proxies CARDCAT_FORWARDED_ALLOW_IPS names. Several workers without
    Redis each count their own budget, so a key gets `workers` times the limit: say so at start.
    """
    if workers > 1 and not settings.redis_url:
        click.echo(
            f"warning: {workers} workers without CARDCAT_REDIS_URL: each worker counts the rate limit on "
            f"its own, so a key may make up to {workers} x {settings.rate_limit} requests per "
            f"{settings.rate_window_s} s; set CARDCAT_REDIS_URL to share one budget",
            err=True,
        )
    allowed = settings.forwarded_allow_ips.strip()
    from catalog_api.kit.http_protocol import EnvelopeHttpToolsProtocol

    return {
        "workers": workers,
        "proxy_headers": bool(allowed),
        "forwarded_allow_ips": allowed or None,
        # unparseable requests (a bad Content-Length...) answered in the envelope, not uvicorn's plain text
        "http": EnvelopeHttpToolsProtocol,
    }


if __name__ == "__main__":
    main()
