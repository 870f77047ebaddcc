"""`cardcat webhooks` and `cardcat events`: webhook endpoints, the deliverer, and pruning the outbox."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from catalog_api.kit.settings import Settings, get_settings

if TYPE_CHECKING:
    from catalog_api.events.secret_box import SecretBox


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
    box = _secret_box(settings)
    engine = make_engine(settings)
    try:
        endpoint_id, secret = add_endpoint(engine, url, settings.webhooks_allow_private, box)
    except URLRefused as exc:
        raise click.ClickException(f"refused {url}: {exc}") from None
    finally:
        engine.dispose()
    click.echo(f"added endpoint {endpoint_id} for {url}; its signing secret (verify `webhook-signature`):")
    click.echo(secret)


def _secret_box(settings: Settings) -> SecretBox:
    """The webhook secrets box, or the reason there is none in an operator's words (no traceback)."""
    from catalog_api.events.secret_box import webhook_box
    from catalog_api.kit.secret_store import SecretStoreError

    try:
        return webhook_box(settings)
    except (SecretStoreError, ValueError) as exc:
        raise click.ClickException(f"no webhook secrets key: {exc}") from None


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


@webhooks.command("rekey")
def webhooks_rekey() -> None:
    """Encrypt every endpoint's signing secret with the current key (CARDCAT_WEBHOOK_SECRETS_KEY, else the
    data dir's): secrets stored in plain text by an older version, or under a key being rotated out
    (CARDCAT_WEBHOOK_SECRETS_OLD_KEYS). Receivers keep their secrets; only how they are stored changes."""
    from catalog_api.events.endpoints import reseal_secrets
    from catalog_api.kit.db import make_engine

    settings = get_settings()
    box = _secret_box(settings)
    engine = make_engine(settings)
    try:
        resealed = reseal_secrets(engine, box)
    finally:
        engine.dispose()
    click.echo(json.dumps({"rekeyed": resealed.changed, "unreadable": resealed.unreadable}))
    if resealed.unreadable:
        raise click.ClickException(
            f"endpoints {resealed.unreadable}: no configured key opens their secret; add the key that "
            "sealed them to CARDCAT_WEBHOOK_SECRETS_OLD_KEYS (or remove and re-add those endpoints)"
        )


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
    _secret_box(settings)  # a missing key stops the deliverer here, with the reason, before it starts
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
