"""Price snapshot files announced by `*_prices.snapshot` events: served only on a valid signed URL."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import FileResponse

from catalog_api.access import file_access
from catalog_api.deps import Context
from catalog_api.kit.schemas import file_responses
from catalog_api.prices import snapshot_files as snapshots
from core.errors import Unauthorized

router = APIRouter(tags=["events"])


@router.get(
    "/files/snapshots/{file_name}",
    response_class=FileResponse,
    responses={**file_responses("application/gzip", signed=True), **file_access.RESPONSES},
)
async def snapshot_file(
    request: Request, context: Context, file_name: str, expires: str = Query(""), signature: str = Query("")
) -> FileResponse:
    """The file named in an event's `snapshot[].url` (the URL carries its own expiry and signature; it is
    bound to no key: see `file_access`). Downloads are counted per client address: `429` past the budget."""
    if not snapshots.verify(context.settings, file_name, expires, signature):
        raise Unauthorized("The snapshot URL's signature is invalid or has expired.")
    headers = await file_access.count(request, file_access.address_bucket(request))
    path = snapshots.snapshot_path(context.settings, file_name)
    return file_access.file_response(path, file_name, headers, "No such snapshot.")
