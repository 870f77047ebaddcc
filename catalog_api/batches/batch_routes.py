"""`/v1/scan/batches`: scan jobs of up to 5,000 photos for volume clients (docs/batches.md).

A batch is opened empty and filled by uploads (`POST .../photos`, the file field `image` once a photo)
and then closed, or made closed from a list of photo URLs in one call. Photos are scanned as soon as
they are in, by the batch workers (`batches.worker`), through the same scanner as `POST /v1/scan`; the
answers are paged in the order they were given. A key sees only its own batches. Photos wait in the
data dir only until scanned (`batches.photo_files`).
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response, StreamingResponse

from catalog_api.access.file_access import requesting_key
from catalog_api.batches import exports, idempotency, photo_files, queue
from catalog_api.batches.schemas import Batch, BatchCreate, BatchResult
from catalog_api.batches.uploads import stage_photos
from catalog_api.deps import AppContext, Context
from catalog_api.kit.envelope import data_response, envelope_body, page
from catalog_api.kit.netguard import is_public_address
from catalog_api.kit.pagination import parse_limit
from catalog_api.kit.schemas import BY_ID, ERRORS, NOT_FOUND, Envelope, ErrorEnvelope, Page
from catalog_api.scan.scanning import ScanningState
from catalog_api.scan.url_fetch import parse_scan_url
from core.errors import BadRequest, PayloadTooLarge, RateLimited, ScanUnavailable, URLNotAllowed
from core.photo import MAX_IMAGE_BYTES
from core.vocabulary import CONDITION_ORDER

router = APIRouter(prefix="/v1/scan/batches", tags=["scan batches"])
# A URL list of 5,000 long URLs, with room to spare; nothing legitimate comes close.
MAX_CREATE_BYTES = 16 * 1024 * 1024
MAX_URL_CHARS = 2048
_CONFLICT = {"model": ErrorEnvelope, "description": "conflict: a closed batch, or a used Idempotency-Key"}
_NO_BATCH = {"model": ErrorEnvelope, "description": "not_found: no such batch for this key"}
_TOO_LARGE = {"model": ErrorEnvelope, "description": "payload_too_large"}
CREATE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    409: _CONFLICT,
    413: _TOO_LARGE,
    503: {"model": ErrorEnvelope, "description": "scan_unavailable"},
}
PHOTOS_ERRORS: dict[int | str, dict[str, Any]] = {**ERRORS, 404: _NO_BATCH, 409: _CONFLICT, 413: _TOO_LARGE}
CLOSE_ERRORS: dict[int | str, dict[str, Any]] = {**ERRORS, 404: _NO_BATCH, 409: _CONFLICT}
READ_ERRORS: dict[int | str, dict[str, Any]] = {**BY_ID, **NOT_FOUND}
BINARY = {"type": "string", "format": "binary"}
IDEMPOTENCY_HEADER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "maxLength": 255},
    "description": "Send the same POST again with the same key: the first answer comes back, nothing twice.",
}


def _accepted(body: Any) -> Response:
    return Response(envelope_body(body), 202, media_type="application/json")


async def _idempotent_write(
    request: Request, context: AppContext, key_id: int, body_digest: str, change: Any, undo: Any = None
) -> Response:
    """Runs `change(conn)` (which returns the batch id it changed) in one transaction with the reply it
    makes, replaying the stored reply for a repeated `Idempotency-Key`. `undo()` runs when `change` ran
    but its transaction did not commit (what it did outside the database is then taken back)."""
    key = idempotency.idempotency_key(request.headers.get(idempotency.HEADER))
    print_ = idempotency.fingerprint(request.method, request.url.path, body_digest)
    try:
        async with context.engine.begin() as conn:
            if key is not None:
                stored = await idempotency.replay(conn, key_id, key, print_)
                if stored is not None:
                    return Response(envelope_body(stored[1]), stored[0], media_type="application/json")
            batch_id = await change(conn)
            body = await queue.describe(conn, batch_id)
            if key is not None:
                await idempotency.remember(conn, key_id, key, print_, 202, body)
    except BaseException as error:
        if undo is not None:
            undo()
        if key is None or not isinstance(error, IntegrityError):
            raise
        async with context.engine.connect() as conn:  # the same key raced us and won: its reply
            stored = await idempotency.replay(conn, key_id, key, print_)
        if stored is None:
            raise
        return Response(envelope_body(stored[1]), stored[0], media_type="application/json")
    return _accepted(body)


async def _read_create(request: Request) -> tuple[BatchCreate, str]:
    """The create body (JSON, optional) and its sha256."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_CREATE_BYTES:
        raise PayloadTooLarge("The batch body is larger than 16 MB.", headers={"Connection": "close"})
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_CREATE_BYTES:
            raise PayloadTooLarge("The batch body is larger than 16 MB.", headers={"Connection": "close"})
    digest = hashlib.sha256(raw).hexdigest()
    if not raw.strip():
        return BatchCreate(), digest
    try:
        payload = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("The request body is not valid JSON.") from None
    if not isinstance(payload, dict):
        raise BadRequest('The body must be a JSON object: {"urls": [...]} or {} for an empty batch.')
    urls, page_mode, events = payload.get("urls"), payload.get("page", False), payload.get("events", "batch")
    if events not in queue.EVENT_MODES:
        raise BadRequest(f'"events" must be one of {", ".join(queue.EVENT_MODES)}.')
    if urls is not None and not (isinstance(urls, list) and all(isinstance(url, str) for url in urls)):
        raise BadRequest('"urls" must be a list of strings.')
    if not isinstance(page_mode, bool):
        raise BadRequest('"page" must be true or false.')
    if page_mode:
        raise BadRequest("Binder-page batches are not available yet: send page: false (the default).")
    if urls is not None:
        for index, url in enumerate(urls):
            if not url.strip() or len(url) > MAX_URL_CHARS:
                raise BadRequest(f"URL {index} must be 1 to {MAX_URL_CHARS} characters.")
            try:
                target = parse_scan_url(url.strip())
            except BadRequest as error:
                raise type(error)(f"URL {index}: {error.message}") from None
            # An address written in the URL is judged now; a host name when its photo is fetched
            # (what it resolves to then is what counts).
            if target.literal is not None and not is_public_address(target.literal):
                raise URLNotAllowed(f"URL {index}: the address is not a public one.")
    cleaned = [url.strip() for url in urls] if urls is not None else None
    return BatchCreate(urls=cleaned, page=page_mode, events=events), digest


async def _check_budget(
    conn: AsyncConnection, context: AppContext, key_id: int, adding: int, batch_total: int
) -> None:
    settings = context.settings
    if batch_total > settings.batch_max_photos:
        raise PayloadTooLarge(f"A batch holds at most {settings.batch_max_photos} photos.")
    used = await queue.photos_added_since(conn, key_id, queue.now() - timedelta(days=1))
    if used + adding > settings.batch_photos_per_day:
        raise RateLimited(
            f"This key may add {settings.batch_photos_per_day} photos to batches in 24 hours "
            f"({used} so far); retry later.",
            headers={"Retry-After": "3600"},
        )


@router.post(
    "",
    status_code=202,
    response_model=Envelope[Batch],
    responses=CREATE_ERRORS,
    openapi_extra={
        "parameters": [IDEMPOTENCY_HEADER],
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": BatchCreate.model_json_schema()}},
        },
    },
)
async def create_batch(request: Request, context: Context, scanning: ScanningState) -> Response:
    """Opens a batch: empty (add photos, then close it), or closed at once holding `urls` (up to 5,000).
    Answers `202` with the batch; its photos are scanned as they come in."""
    if scanning.scanner is None:
        raise ScanUnavailable("Scanning is not configured on this deployment.")
    key_id = await requesting_key(context.engine, request)
    create, digest = await _read_create(request)
    urls = create.urls or []
    if len(urls) > context.settings.batch_max_photos:
        raise PayloadTooLarge(f"A batch holds at most {context.settings.batch_max_photos} photos.")

    async def change(conn: AsyncConnection) -> str:
        await _check_budget(conn, context, key_id, len(urls), len(urls))
        photos = [queue.NewPhoto(url, url) for url in urls]
        return await queue.create_batch(
            conn, key_id, page=create.page, ttl_s=context.settings.batch_ttl_s, photos=photos,
            close=create.urls is not None, events=create.events,
        )  # fmt: skip

    return await _idempotent_write(request, context, key_id, digest, change)


@router.post(
    "/{batch_id}/photos",
    status_code=202,
    response_model=Envelope[Batch],
    responses=PHOTOS_ERRORS,
    openapi_extra={
        "parameters": [IDEMPOTENCY_HEADER],
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "image": {"type": "array", "items": {"type": "string", "format": "binary"}}
                        },
                        "required": ["image"],
                    }
                }
            },
        },
    },
)
async def add_photos(batch_id: str, request: Request, context: Context) -> Response:
    """Adds photos to an open batch: the file field `image` once a photo (up to 100 a request, each up to
    10 MB and checked as `POST /v1/scan` checks a photo; the file name is kept as the photo's name)."""
    key_id = await requesting_key(context.engine, request)
    settings = context.settings
    async with context.engine.connect() as conn:
        batch = await queue.owned_batch(conn, batch_id, key_id)
    if request.headers.get(idempotency.HEADER) is None:  # a retry may be answered even once it is closed
        queue.require_open(batch)
    upload = await stage_photos(
        request,
        photo_files.staging_dir(settings, batch_id),
        max_photos=settings.batch_upload_max_photos,
        max_bytes=MAX_IMAGE_BYTES,
    )
    placed: list[Path] = []

    async def change(conn: AsyncConnection) -> str:
        batch = await queue.owned_batch(conn, batch_id, key_id, lock=True)
        queue.require_open(batch)
        await _check_budget(conn, context, key_id, len(upload.photos), batch.photo_count + len(upload.photos))
        positions = await queue.append_photos(conn, batch_id, [queue.NewPhoto(p.name) for p in upload.photos])
        # In place before the commit, so a worker that takes a photo finds its file (photo_files).
        for photo, position in zip(upload.photos, positions, strict=True):
            target = photo_files.photo_path(settings, batch_id, position)
            photo.path.replace(target)
            placed.append(target)
        return batch_id

    def undo() -> None:
        for path in placed:
            path.unlink(missing_ok=True)

    try:
        return await _idempotent_write(request, context, key_id, upload.digest, change, undo)
    finally:
        upload.discard()  # what was not placed (a replay, a refusal)


@router.post(
    "/{batch_id}/close",
    status_code=202,
    response_model=Envelope[Batch],
    responses=CLOSE_ERRORS,
    openapi_extra={"parameters": [IDEMPOTENCY_HEADER]},
)
async def close_batch(batch_id: str, request: Request, context: Context) -> Response:
    """No more photos: the batch is `done` once every photo is answered (at once if they all are)."""
    key_id = await requesting_key(context.engine, request)

    async def change(conn: AsyncConnection) -> str:
        await queue.close_batch(conn, await queue.owned_batch(conn, batch_id, key_id, lock=True))
        return batch_id

    return await _idempotent_write(request, context, key_id, "", change)


@router.get("/{batch_id}", response_model=Envelope[Batch], responses=READ_ERRORS)
async def get_batch(batch_id: str, request: Request, context: Context) -> Response:
    """The batch: status, photos answered and waiting, outcomes and progress."""
    key_id = await requesting_key(context.engine, request)
    async with context.engine.connect() as conn:
        await queue.owned_batch(conn, batch_id, key_id)
        return data_response(request, await queue.describe(conn, batch_id))


@router.get("/{batch_id}/results", response_model=Envelope[Page[BatchResult]], responses=READ_ERRORS)
async def batch_results(
    batch_id: str, request: Request, context: Context, limit: str | None = None, cursor: str | None = None
) -> Response:
    """The photos' answers in the order they were given (each a `POST /v1/scan` answer with the photo's
    `index`, `name`, `url` and `error`). While the batch is unfinished every page has a `next_cursor`
    (poll with it: each answer comes once, none is skipped); it is null only on the last page of a
    finished batch."""
    key_id = await requesting_key(context.engine, request)
    size, scope = parse_limit(limit), ["batch-results", batch_id]
    position = context.cursors.decode(cursor, scope, (int,))
    after = position[0] if position else 0
    async with context.engine.connect() as conn:
        batch = await queue.owned_batch(conn, batch_id, key_id)
        rows = await queue.answers_after(conn, batch_id, after, size + 1)
    shown = rows[:size]
    last = shown[-1][0] if shown else after
    more = len(rows) > size or batch.status not in queue.FINISHED
    next_cursor = context.cursors.encode(scope, [last]) if more else None
    return data_response(request, page([answer for _, answer in shown], next_cursor))


EXPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: _NO_BATCH,
    200: {
        "description": "The export, streamed: CSV (`text/csv`) or NDJSON (`application/x-ndjson`)",
        "content": {
            "text/csv": {"schema": {"type": "string"}},
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    },
}


@router.get("/{batch_id}/export", response_class=StreamingResponse, responses=EXPORT_RESPONSES)
async def export_batch(
    batch_id: str,
    request: Request,
    context: Context,
    format: str = "csv",
    layout: str = "cardcat",
    condition: str = "NM",
    language: str = "English",
) -> Response:
    """The answers as a file to import: `format` `csv` or `ndjson`; `layout` `cardcat` (every answer,
    identical ones as one row with a quantity, races and unidentified photos after the sure rows) or
    `tcgplayer` (the marketplace's inventory import columns, single confident answers only; the rows
    left out are counted in `X-Cardcat-Left-Out`); prices in `condition` (NM, LP, MP, HP, DMG);
    `language` fills the marketplace layout's Language column. A running batch exports what is
    answered so far."""
    if format not in exports.FORMATS:
        raise BadRequest(f"format must be one of {', '.join(exports.FORMATS)}.")
    if layout not in exports.LAYOUTS:
        raise BadRequest(f"layout must be one of {', '.join(exports.LAYOUTS)}.")
    if condition not in CONDITION_ORDER:
        raise BadRequest(f"condition must be one of {', '.join(CONDITION_ORDER)}.")
    if not (0 < len(language) <= 40 and language.isprintable()):
        raise BadRequest("language must be 1 to 40 printable characters.")
    key_id = await requesting_key(context.engine, request)
    async with context.engine.connect() as conn:
        await queue.owned_batch(conn, batch_id, key_id)
        answers: list[dict[str, Any]] = []
        while page_rows := await queue.answers_after(conn, batch_id, len(answers), exports.READ_PAGE):
            answers += [answer for _, answer in page_rows]
        rows = await exports.priced_rows(conn, answers, condition)
    left_out = sum(len(row.photos) for row in rows if row.outcome != "match")
    headers = {
        "Content-Disposition": f'attachment; filename="{batch_id}-{layout}.{format}"',
        "X-Cardcat-Left-Out": str(left_out if layout == "tcgplayer" else 0),
    }
    if format == "ndjson":
        return StreamingResponse(
            exports.ndjson_lines(rows, condition), media_type="application/x-ndjson", headers=headers
        )
    lines = exports.csv_lines(rows, layout, condition, language)
    return StreamingResponse(lines, media_type="text/csv; charset=utf-8", headers=headers)


@router.delete("/{batch_id}", response_model=Envelope[Batch], responses=READ_ERRORS)
async def cancel_batch(batch_id: str, request: Request, context: Context) -> Response:
    """Cancels a batch that has not finished: its unscanned photos are deleted, answers given so far
    stay readable. A finished batch is answered as it is."""
    key_id = await requesting_key(context.engine, request)
    async with context.engine.begin() as conn:
        cancelled = await queue.cancel_batch(conn, await queue.owned_batch(conn, batch_id, key_id, lock=True))
        body = await queue.describe(conn, batch_id)
    if cancelled:
        photo_files.remove_batch(context.settings, batch_id)
    return data_response(request, body)
