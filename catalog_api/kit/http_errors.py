"""The one place an error becomes an HTTP answer: the spec's `{data, error}` envelope, the error's status,
its code and its headers.

Errors reach the client by three roads, and all three go through here: a handler raises an `APIError`
(or FastAPI/Starlette raise their own, turned into ours by `as_api_error`) and FastAPI's exception
handlers answer with `error_response`; the `/v1` gate answers before routing, as plain ASGI, with
`send_error`; and uvicorn's parser answers requests it cannot read (`kit.http_protocol`) with
`error_body`. The scanner's refusals arrive as the scan contract's `{code, message}` and are raised
as the `APIError` of that code by the scan client.

No exception may leave the app: Starlette's outermost middleware answers one with a 500 but then raises
it again, and uvicorn, seeing an exception after a complete response, closes the connection, so the
next request a keep-alive client already sent on it vanishes without an answer. `ErrorGuard` sits
outside everything else and ends every exception in an answer.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog_api.kit.envelope import JSON, error_body
from core.errors import (
    APIError,
    BadRequest,
    DatabaseUnavailable,
    Internal,
    MethodNotAllowed,
    NotFound,
)

log = logging.getLogger("cardcat")
INTERNAL = "Internal error; please retry."


def error_response(error: APIError) -> Response:
    return Response(
        error_body(error.code, error.message), error.status, headers=error.headers, media_type=JSON
    )


async def send_error(send: Send, error: APIError, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """The answer to `error` written straight to an ASGI `send` (for middleware that answers before
    routing), with `extra` headers before the error's own."""
    body = error_body(error.code, error.message)
    headers = [
        (b"content-type", JSON.encode()),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
        *((name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items()),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def as_api_error(exc: Exception) -> APIError:
    """Any exception as the API's error: ours as they are, the framework's by their meaning, the rest
    `500 internal` (logged)."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, StarletteHTTPException):
        if exc.status_code == 404:
            return NotFound("No such resource.")
        if exc.status_code == 405:
            allow = (exc.headers or {}).get("Allow", "")
            return MethodNotAllowed("Method not allowed here.", headers={"Allow": allow})
        return BadRequest(str(exc.detail) or "Bad request.")
    if isinstance(exc, RequestValidationError):
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        return BadRequest(f"Invalid request: {problems}")
    if is_database_down(exc):
        log.warning("database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return DatabaseUnavailable()
    log.error("unhandled error", exc_info=exc)
    return Internal(INTERNAL)


def is_database_down(exc: BaseException) -> bool:
    """Whether `exc` says the database could not be reached or dropped the connection (a restart, a
    failover), rather than that a statement was wrong: those are worth retrying in a moment."""
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, DBAPIError):
        import psycopg

        cause = exc.orig
        return exc.connection_invalidated or isinstance(
            cause, psycopg.OperationalError | psycopg.InterfaceError | OSError
        )
    return False


class ErrorGuard:
    """The outermost middleware: an exception nothing else answered is answered here, in the envelope,
    and not raised further (see the module's docstring). Only a response already under way cannot be
    answered again; that one is raised and its connection closed, as nothing else is possible."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                raise
            await send_error(send, as_api_error(exc))


def install_error_handlers(app: FastAPI) -> None:
    """Every error a request can end in is answered by `error_response(as_api_error(exc))`."""

    async def handle(_request: Request, exc: Exception) -> Response:
        return error_response(as_api_error(exc))

    for kind in (
        APIError,
        StarletteHTTPException,
        RequestValidationError,
        DBAPIError,
        PoolTimeout,
        Exception,
    ):
        app.add_exception_handler(kind, handle)
