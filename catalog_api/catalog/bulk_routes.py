"""`GET /v1/bulk` (the bulk files, one per kind, with signed URLs) and the signed file route itself."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import Field
from starlette.responses import FileResponse, Response

from catalog_api.access import file_access
from catalog_api.catalog import bulk_files
from catalog_api.deps import Context
from catalog_api.kit.envelope import data_response, page
from catalog_api.kit.schemas import BY_ID, Envelope, Page, Strict, file_responses
from core.errors import Internal, Unauthorized

router = APIRouter(tags=["bulk"])


class BulkFile(Strict):
    """One bulk file (the shape lives beside its only route)."""

    kind: str = Field(description="`cards`, `products`, `expansions` or `series`.")
    url: str = Field(
        description="Signed download URL (no key header needed), bound to the key that listed it: valid "
        "an hour by default (`CARDCAT_FILE_URL_TTL_S`) and only while that key is active; downloads count "
        "against that key's rate limit."
    )
    sha256: str = Field(description="Hex SHA-256 of the file's bytes (the gzip, as downloaded).")
    bytes: int = Field(description="The file's size in bytes.")
    rows: int = Field(description="Lines in the file: one record each.")
    generated_at: str = Field(description="When this content was built (UTC, ISO 8601).")


RETRY_AFTER_S = 30


@router.get("/v1/bulk", response_model=Envelope[Page[BulkFile]], responses=BY_ID)
async def list_bulk_files(request: Request, context: Context) -> Response:
    """The whole catalog as one `.ndjson.gz` file per kind (`cards`, `products`, `expansions`, `series`):
    each line is the record the kind's detail read serves (cards: the full card object with its
    printings and their current prices). Rebuilt after every catalog or price sync that changed
    something. Download each `url` (signed, no key header needed, valid an hour by default and only while
    the key that listed it is active; each download counts against that key's rate limit) and check it
    against `sha256` and `bytes`; `rows` is its line count; list again for fresh URLs. `next_cursor` is
    always null. Before the first build (a new deployment, for a few seconds) the answer is `500
    internal` with `Retry-After`."""
    key_id = await file_access.requesting_key(context.engine, request)
    items = bulk_files.listing(context.settings, key_id)
    if items is None:
        raise Internal(
            "The bulk files are being built; retry shortly.", headers={"Retry-After": str(RETRY_AFTER_S)}
        )
    body: dict[str, Any] = page(items, None)
    # Read from the data dir on every request, not through the response cache: the files are replaced
    # after the sync's commit, and a cached listing would outlive them.
    return data_response(request, body)


@router.get(
    "/files/bulk/{file_name}",
    response_class=FileResponse,
    responses={**file_responses("application/gzip", signed=True), **file_access.BOUND_RESPONSES},
)
async def bulk_file(
    request: Request,
    context: Context,
    file_name: str,
    expires: str = Query(""),
    key: str = Query("", description="Id of the API key the URL was issued to (signed with it)."),
    signature: str = Query(""),
) -> FileResponse:
    """A file named in `GET /v1/bulk` (the URL carries its own expiry, key binding and signature): `401`
    when the signature is wrong or the URL expired, `403` once the key it was issued to is revoked or
    expired, `429` past that key's request budget (downloads share it with its `/v1` requests)."""
    key_id = bulk_files.verify_url(context.settings, file_name, expires, key, signature)
    if key_id is None:
        raise Unauthorized("The bulk file URL's signature is invalid or has expired.")
    bucket = await file_access.active_key_bucket(context.engine, key_id)
    headers = await file_access.count(request, bucket)
    path = bulk_files.file_path(context.settings, file_name)
    missing = "No such bulk file (a newer build replaced it: ask GET /v1/bulk again)."
    return file_access.file_response(path, file_name, headers, missing)
