"""`cardcat webhooks` and `cardcat events`: webhook endpoints, the deliverer, and pruning the outbox."""

from __future__ import annotations

import json

import click

from catalog_api.kit.settings import get_settings


@click.group()
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


@click.group()
def events() -> None:
    """The event outbox."""


@events.command("deliver")
@click.option("--once", is_flag=True, help="Deliver what is due now, then exit.")
@click.option("--exit-with-parent", is_flag=True, hidden=True, help="Stop when the parent process ends.")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=0,
    help="Serve Prometheus /metrics (this deliverer's counts, the webhook queue) on this port. Not "
    "needed under `cardcat serve`, whose /metrics already includes its deliverer.",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address of --metrics-port.")
def events_deliver(once: bool, exit_with_parent: bool, metrics_port: int, metrics_host: str) -> None:
    """Send pending events to the webhook endpoints (the worker; `cardcat serve` runs one)."""
    import logging
    import os
    import signal
    import threading

    from catalog_api.events.deliverer import Deliverer
    from catalog_api.kit.db import make_engine
    from catalog_api.kit.metrics import mark_process_dead

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = get_settings()
    engine = make_engine(settings)
    if metrics_port:
        from catalog_api.ops.scrape_metrics import serve_metrics_port

        serve_metrics_port(engine, settings, metrics_host, metrics_port)
    stop = threading.Event()
    # SIGTERM/SIGINT finish the post in flight, then exit; an unfinished one would be sent again anyway.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    counts = Deliverer(engine, settings).run(
        once=once, stop=stop, alive=lambda: not exit_with_parent or os.getppid() == parent
    )
    engine.dispose()
    mark_process_dead()
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
