"""Card faces from the service's own image store (the CDN stand-in): public, immutable, by digest."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import FileResponse

from catalog_api.deps import Context
from catalog_api.kit.images import ImageStore
from catalog_api.kit.schemas import file_responses
from core.errors import NotFound

router = APIRouter(tags=["images"])


@router.get("/images/{key}/{size}.jpg", response_class=FileResponse, responses=file_responses("image/jpeg"))
async def card_image(context: Context, key: str, size: str) -> FileResponse:
    path = ImageStore(context.settings.images_dir).path(key, size)
    if path is None or not path.is_file():
        raise NotFound("No such image.")
    return FileResponse(
        path, media_type="image/jpeg", headers={"Cache-Control": "public, max-age=31536000, immutable"}
    )
