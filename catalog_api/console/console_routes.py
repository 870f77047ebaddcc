"""`GET /console` and its assets: the browser console, served by the ingress from package files.

Outside `/v1` (the gate lets it through: the page holds no data, every read it makes is a `/v1` call
with the user's own key from `sessionStorage`) and outside the OpenAPI document (it is not API).
Every answer carries a Content-Security-Policy that allows only our own origin for scripts, styles and
calls, plus the configured image origin (`CARDCAT_PUBLIC_URL`, which may be a CDN we run) and `blob:`
for the preview of the photo being scanned: no inline script, no third party, no framing.
"""

from __future__ import annotations

from importlib import resources
from urllib.parse import urlsplit

from fastapi import APIRouter
from starlette.responses import Response

from catalog_api.deps import Context
from core.errors import NotFound

router = APIRouter(include_in_schema=False)

# The only files served: name -> media type. A request can never name a path.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def content_security_policy(public_url: str) -> str:
    """Self only, plus the origin image URLs point at when that is another host of ours."""
    parts = urlsplit(public_url)
    image_origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            " ".join(filter(None, ["img-src 'self' blob:", image_origin])),
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


def _asset(context: Context, name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"The console has no file {name!r}.")
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    headers = {
        "Content-Security-Policy": content_security_policy(context.settings.public_url),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",  # small files; a new release shows at once
    }
    return Response(body, media_type=media_type, headers=headers)


@router.get("/console")
@router.get("/console/")
async def console_page(context: Context) -> Response:
    return _asset(context, "index.html")


@router.get("/console/{name}")
async def console_asset(context: Context, name: str) -> Response:
    return _asset(context, name)
