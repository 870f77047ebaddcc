"""The one `/v1` ingress: FastAPI app factory, lifespan and OpenAPI (errors map in `kit.http_errors`)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from catalog_api.access.gate import V1Gate, is_v1
from catalog_api.access.keys import KeyVerifier
from catalog_api.access.ratelimit import make_rate_limiter
from catalog_api.access.unknown_keys import UnknownKeys
from catalog_api.batches import batch_routes
from catalog_api.batches.worker import BatchWorker
from catalog_api.catalog import bulk_routes, card_routes, movers_routes, reference_routes
from catalog_api.catalog.readmodel import SnapshotHolder
from catalog_api.console import console_routes
from catalog_api.deps import AppContext, CachedReads
from catalog_api.docs_ui import docs_routes
from catalog_api.kit.cache import ResponseCache
from catalog_api.kit.db import make_async_engine
from catalog_api.kit.http_errors import ErrorGuard, install_error_handlers
from catalog_api.kit.metrics import mark_process_dead
from catalog_api.kit.pagination import CursorCodec
from catalog_api.kit.secret_store import stored_secrets
from catalog_api.kit.settings import Settings, get_settings
from catalog_api.ops import bench_routes, health_routes, image_routes, metrics_routes
from catalog_api.ops.access_log import AccessLog
from catalog_api.ops.http_metrics import HttpMetrics
from catalog_api.prices import file_routes, history_routes
from catalog_api.scan import scan_routes
from catalog_api.scan.client import HandleClientFactory, open_scan_client
from catalog_api.scan.scan_routes import interactive_in_flight
from catalog_api.scan.scanning import install_scanning

NOT_MODIFIED: dict[str, Any] = {
    "description": "Not Modified: `If-None-Match` matched the ETag; no body",
    "headers": {"ETag": {"description": "the strong ETag of the body", "schema": {"type": "string"}}},
}

log = logging.getLogger("cardcat")


def _cursor_secret(settings: Settings) -> bytes:
    """The cursor key: CARDCAT_CURSOR_SECRET, else the data dir's random one (never derived from the
    database URL, which is guessable), so every worker and replica on that data dir agrees."""
    secret = settings.cursor_secret or stored_secrets(settings.data_dir).cursor
    return hashlib.sha256(secret.encode()).digest()


def create_app(settings: Settings | None = None, handle_client: HandleClientFactory | None = None) -> FastAPI:
    """The API. `handle_client` opens the scanner's in-cluster client when `CARDCAT_SCAN_APP` names a
    Serve app (`cardcat serve` hands in `serve_app.ingress.ServeHandleScanClient`)."""
    settings = settings or get_settings()
    engine = make_async_engine(settings)
    limiter = make_rate_limiter(settings.redis_url, settings.rate_limit, settings.rate_window_s)
    keys = KeyVerifier(engine, UnknownKeys(settings.redis_url, settings.sqlalchemy_url))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await snapshots.get()  # build the search indexes before the first request
        scanning.scanner = await asyncio.to_thread(
            open_scan_client, settings.scan_app, settings.scan_url, settings.ray_address, handle_client
        )
        batch_worker = BatchWorker(app.state.context, scanning, lambda: interactive_in_flight(app))
        batch_worker.start()
        yield
        await batch_worker.stop()
        if scanning.scanner is not None:
            await scanning.scanner.aclose()
        await limiter.close()
        await keys.unknown.close()
        await engine.dispose()
        mark_process_dead()  # this worker's live gauges leave the shared metrics directory

    app = FastAPI(
        title="cardcat",
        version="1.0.0",
        summary="Trading-card catalog API with a photo scanner.",
        lifespan=lifespan,
        docs_url=None,  # `docs_routes` serves /docs from our own files, with a CSP
        redoc_url=None,
    )
    cache_bytes = settings.response_cache_mb * 1024 * 1024
    cache = ResponseCache(cache_bytes) if cache_bytes > 0 else None
    snapshots = app.state.snapshots = SnapshotHolder(engine)  # handed out by `catalog.readmodel`
    scanning = install_scanning(app)
    app.state.context = AppContext(
        settings, engine, snapshots.data_version, CursorCodec(_cursor_secret(settings)), cache=cache
    )
    routers = (
        card_routes,
        reference_routes,
        bulk_routes,
        movers_routes,
        history_routes,
        scan_routes,
        batch_routes,
        health_routes,
        image_routes,
        file_routes,
        console_routes,
        docs_routes,
    )
    app.state.rate_limiter = limiter  # the gate's, also counting /files downloads (access.file_access)
    for router in (module.router for module in routers):
        app.include_router(router)
    if settings.bench_routes:
        app.include_router(bench_routes.router)
    if not settings.metrics_port:  # else `cardcat serve` answers /metrics on that port
        app.include_router(metrics_routes.router)
    install_error_handlers(app)
    app.add_middleware(CachedReads, context=app.state.context)  # inside the gate: hits are authorised
    app.add_middleware(V1Gate, keys=keys, limiter=limiter)
    app.add_middleware(ErrorGuard)  # outside the gate, so the gate's own failures are answered
    app.add_middleware(HttpMetrics)  # added last: outermost, so every answer is counted as sent
    if settings.access_log:  # outside even the metrics: its latency is the whole request's
        app.add_middleware(AccessLog)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, corrected to what the server sends, plus the bearer scheme the gate enforces
    on every `/v1` path.

    FastAPI lists a `422` on every operation with parameters, but validation errors are answered `400
    bad_request` (`kit.http_errors`), so no `422` is ever sent. Every GET under `/v1` and
    `/health` answers through `data_response`, which gives `304` on a matching `If-None-Match`."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
    schema.setdefault("components", {})["securitySchemes"] = {
        "apiKey": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <API key>"}
    }
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            if method == "get" and (is_v1(path) or path == "/health"):
                responses["304"] = NOT_MODIFIED
            operation["responses"] = dict(sorted(responses.items()))
            if is_v1(path):
                operation["security"] = [{"apiKey": []}]
    component_schemas = schema["components"].get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        component_schemas.pop(unused, None)
    app.openapi_schema = schema
    return schema
