"""`cardcat serve` and `cardcat demo`: the product put together.

`serve` starts the Ray Serve scanner (when its models and an index are present), the event deliverer
(a child process) and the uvicorn ingress. Settings travel explicitly: one worker gets an app built from
the `Settings` object; several workers are a child `cardcat serve` given a copy of the environment that
names the scanner, so this process's `os.environ` is never rewritten for our settings.

The one variable it does set is prometheus_client's own, `PROMETHEUS_MULTIPROC_DIR` (a new
`<data dir>/metrics/<pid>`, unless already set): the library reads it from the environment in every
process that counts (this one, uvicorn's workers, the deliverer), so it must be there before they start.
It is set after Ray has started, so Ray's own processes never write into it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cardcat.cli.bulk import refresh_bulk_in_background
from cardcat.cli.catalog import catalog_sync, index_build
from cardcat.cli.db import db_upgrade
from cardcat.cli.keys import keys_create
from cardcat.cli.prices import prices_sync
from catalog_api.kit.settings import REPO_ROOT, Settings, get_settings

if TYPE_CHECKING:  # the scanner's package is imported only when the scanner starts
    from serve_app.config import ScanConfig

SHARED_CATALOG = REPO_ROOT.parent / "shared" / "catalog"
# This command line run as a child process (the deliverer, the workers of `serve`).
CARDCAT = [sys.executable, "-m", "cardcat.cli"]
# prometheus_client's multiprocess directory (catalog_api.kit.metrics).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _start_deliverer(settings: Settings) -> Any:
    """`cardcat events deliver` as a child of `serve` (one, whatever the number of uvicorn workers)."""
    import subprocess

    if not settings.deliver_events:
        return None
    command = [*CARDCAT, "events", "deliver", "--exit-with-parent"]
    return subprocess.Popen(command)


def _stop_deliverer(process: Any, settings: Settings) -> None:
    """SIGTERM lets it finish the post in flight (at most the webhook timeout); then it is killed."""
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=settings.webhooks_timeout_s + 5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def scan_config(settings: Settings) -> ScanConfig:
    """The scanner `serve` starts, as the `CARDCAT_SCAN_*` settings describe it."""
    from serve_app.config import FACE_CHECK, SECOND_DETECTOR, ScanConfig
    from serve_app.fusion import Thresholds

    known = {f.name for f in dataclasses.fields(Thresholds)}
    unknown = sorted(set(settings.scan_thresholds) - known)
    if unknown:
        raise click.ClickException(
            f"CARDCAT_SCAN_THRESHOLDS names no fusion threshold: {', '.join(unknown)}"
            f" (known: {', '.join(sorted(known))})"
        )
    return ScanConfig(
        index_dir=str(settings.index_dir),
        replicas=settings.scan_replicas,
        detector_precision=settings.scan_detector_precision,
        embedder_runtime=settings.scan_embedder_runtime,
        detector_runtime=settings.scan_detector_runtime,
        reader_runtime=settings.scan_reader_runtime,
        threads=settings.scan_threads,
        batch_wait_ms=settings.scan_batch_wait_ms,
        first_look=settings.scan_first_look,
        second_detector_weights=str(SECOND_DETECTOR) if settings.scan_second_detector else "",
        face_check_weights=str(FACE_CHECK) if settings.scan_face_check else "",
        thresholds=dict(settings.scan_thresholds),
    )


@click.command("serve")
@click.option("--host", default="127.0.0.1")
@click.option("--port", default=8000, type=int)
@click.option("--workers", default=1, type=int, help="uvicorn worker processes")
@click.option(
    "--scan/--no-scan",
    default=None,
    help="Start the Ray Serve scanner too (default: when the models and an index are present).",
)
@click.option("--metrics-port-served", is_flag=True, hidden=True, help="A parent serves the metrics port.")
def serve(host: str, port: int, workers: int, scan: bool | None, metrics_port_served: bool = False) -> None:
    """Serve the API (uvicorn), and the scanner on Ray Serve behind it."""
    settings = get_settings()
    started_ray = False
    # An explicit cluster address: deploy the scanner there (its nodes hold the replicas) and leave it
    # running when this ingress stops; otherwise Ray starts here and stops with this process.
    attach_to = "" if settings.ray_address in ("", "auto") else settings.ray_address
    if scan is not False and not (settings.scan_url or settings.scan_app):
        from serve_app.config import models_present

        config = scan_config(settings)
        missing = models_present(config)
        if missing and scan:
            raise click.ClickException(f"cannot start the scanner, missing: {', '.join(missing)}")
        if not missing:
            from serve_app.local import start_scanner

            app_name, ray_address = start_scanner(
                config,
                settings.scan_port or None,
                attach_to,
                settings.scan_metrics_port,
                photos_in_flight=workers * settings.scan_max_in_flight,  # the store holds them all
            )
            settings = settings.model_copy(update={"scan_app": app_name, "ray_address": ray_address})
            started_ray = True
        else:
            click.echo("scanner not started (no index yet: `cardcat index build`); serving the catalog only")
    _share_metrics(settings, host, serve_port=not metrics_port_served)
    deliverer = _start_deliverer(settings)
    refresh_bulk_in_background(settings)
    try:
        if started_ray and workers > 1:
            _serve_in_child(settings, host, port, workers)
        else:
            _run_uvicorn(settings, host, port, workers)
    finally:
        if deliverer is not None:
            _stop_deliverer(deliverer, settings)
        if started_ray:
            from serve_app.local import stop_scanner

            stop_scanner(attached=bool(attach_to))


def ingress_app(settings: Settings | None = None) -> Any:
    """The API as `cardcat serve` runs it (uvicorn's factory, by name in each worker process): with the
    scanner's in-cluster client, which only this composition root may hand to `catalog_api`."""
    from catalog_api.app import create_app

    return create_app(settings, handle_client=_scan_handle_client)


def _scan_handle_client(app_name: str, ray_address: str) -> Any:
    """`serve_app.ingress.ServeHandleScanClient`, imported only when a scanner is configured: it brings
    Ray, which a catalog-only worker should not load."""
    from serve_app.ingress import ServeHandleScanClient

    return ServeHandleScanClient(app_name, ray_address)


def _run_uvicorn(settings: Settings, host: str, port: int, workers: int) -> None:
    """uvicorn in this process. One worker builds its app from `settings` itself; several workers are
    processes of their own that import the factory by name and read the same settings from the
    environment they inherit (nothing here changed it)."""
    import uvicorn

    from catalog_api.ops.access_log import uvicorn_log_config

    app: Any = "cardcat.cli.serve:ingress_app" if workers > 1 else functools.partial(ingress_app, settings)
    uvicorn.run(
        app,
        factory=True,
        host=host,
        port=port,
        log_level="info",
        # Ours (catalog_api.ops.access_log, one JSON line a request) instead of uvicorn's, which would
        # print the raw path and query (signed file URLs' signatures) and log each request twice.
        access_log=False,
        log_config=uvicorn_log_config(settings.access_log),
        **_uvicorn_options(settings, workers),
    )


def _serve_in_child(settings: Settings, host: str, port: int, workers: int) -> None:
    """Several workers beside a scanner this process started: they must join its Ray instance by address,
    so a child `cardcat serve` runs them with a copy of the environment that names the scanner (and no
    second deliverer). Termination signals are passed on; the child finishes its requests and exits."""
    import signal
    import subprocess

    env = {
        **os.environ,
        "CARDCAT_SCAN_APP": settings.scan_app,
        "CARDCAT_RAY_ADDRESS": settings.ray_address,
        "CARDCAT_DELIVER_EVENTS": "false",
        # This process answers the metrics port; the workers still leave /metrics off the API port.
        "CARDCAT_METRICS_PORT": str(settings.metrics_port),
    }
    command = [*CARDCAT, "serve", "--host", host, "--port", str(port), "--workers", str(workers), "--no-scan"]
    command.append("--metrics-port-served")
    child = subprocess.Popen(command, env=env)

    def forward(signum: int, _frame: Any) -> None:
        child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _share_metrics(settings: Settings, host: str, serve_port: bool) -> None:
    """One metrics directory for every process this command starts (`catalog_api.kit.metrics`), and
    the metrics port when one is asked for. A child `cardcat serve` (the workers beside a scanner) finds
    both already arranged by its parent and only inherits them."""
    # Not imported from kit.metrics: importing it declares the metrics, which must come after this.
    if not os.environ.get(MULTIPROC_ENV):
        os.environ[MULTIPROC_ENV] = str(_fresh_metrics_dir(settings))
    if settings.metrics_port and serve_port:
        from catalog_api.kit.db import make_engine
        from catalog_api.ops.scrape_metrics import serve_metrics_port

        serve_metrics_port(make_engine(settings), settings, host, settings.metrics_port)
        click.echo(f"metrics on http://{host}:{settings.metrics_port}/metrics")


def _fresh_metrics_dir(settings: Settings) -> Path:
    """`<data dir>/metrics/<this pid>`: a new, empty directory per server (a restart starts every counter
    from zero, as Prometheus expects of a new process, and two servers on one data dir never sum each
    other's counts); directories of servers no longer running are removed. A private temporary directory
    where the data dir is read-only (deploy/k8s)."""
    import shutil
    import tempfile

    from catalog_api.kit.private_files import private_dir

    parent = settings.data_dir / "metrics"
    try:
        private_dir(parent)
        for old in parent.iterdir():
            if old.is_dir() and not (old.name.isdigit() and _alive(int(old.name))):
                shutil.rmtree(old, ignore_errors=True)
        directory = parent / str(os.getpid())
        shutil.rmtree(directory, ignore_errors=True)  # a pid reused from an earlier run
        directory.mkdir(mode=0o700)
        return directory
    except OSError:
        return Path(tempfile.mkdtemp(prefix="cardcat-metrics-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


DEMO_FACES = ("base1", "base4", "swsh10tg")  # reprints sharing artwork, and TG numbers


@click.command("demo")
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


def _uvicorn_options(settings: Settings, workers: int) -> dict[str, Any]:
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
