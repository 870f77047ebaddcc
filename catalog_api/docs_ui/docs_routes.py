"""`GET /docs`: Swagger UI over `/openapi.json`, every byte of it served by us.

FastAPI's default page loads Swagger UI from a public CDN at a floating major version, without
integrity or CSP. `/docs` shares its origin with `/console`, whose API key lives in `sessionStorage`,
so a script from someone else's server on that origin could read the key. Here the page loads Swagger UI
5.35.0 from files in this package (`swagger_ui/`, the npm `swagger-ui-dist` release, with its licence;
PROVENANCE.md says how to check or update them), and its Content-Security-Policy lets only our own
origin and FastAPI's one inline start-up script (by its SHA-256) run: a script from elsewhere, or one
injected into the page, is refused by the browser. It also works on a machine with no internet.

Outside `/v1` (no key: the document is public) and outside the OpenAPI document. ReDoc is not served.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import Response

from core.errors import NotFound

router = APIRouter(include_in_schema=False)

SWAGGER_UI_VERSION = "5.35.0"
ASSETS_PATH = f"/docs/assets/{SWAGGER_UI_VERSION}"  # versioned, so the files can be cached for good

# The only files served: name -> media type. A request can never name a path.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}

INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def content_security_policy(inline_script_hashes: list[str]) -> str:
    """Self only, plus the page's inline start-up script by hash. `data:` images are the icons inlined
    in Swagger UI's stylesheet; `connect-src 'self'` is the document and "Try it out"."""
    scripts = " ".join(["'self'", *(f"'sha256-{digest}'" for digest in inline_script_hashes)])
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {scripts}",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


def _hash(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


@cache
def docs_page(title: str, openapi_url: str) -> tuple[bytes, str]:
    """The page FastAPI writes, pointed at our files, and its CSP (hashes of the inline scripts it
    contains, computed from the page itself, so a FastAPI upgrade that changes the script still matches)."""
    html = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=title,
        swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
        oauth2_redirect_url=None,
        swagger_ui_parameters={"validatorUrl": None},  # else a badge image from the public validator
    ).body
    page = bytes(html)
    hashes = [_hash(script) for script in INLINE_SCRIPT.findall(page.decode())]
    return page, content_security_policy(hashes)


def _headers(policy: str, cache_control: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": cache_control,
    }


@cache
def _asset_bytes(name: str) -> bytes:
    return resources.files(__package__).joinpath("swagger_ui", name).read_bytes()


@router.get("/docs")
async def docs(request: Request) -> Response:
    page, policy = docs_page(f"{request.app.title} - Swagger UI", request.app.openapi_url or "/openapi.json")
    return Response(page, media_type="text/html; charset=utf-8", headers=_headers(policy, "no-cache"))


@router.get("/docs/assets/{version}/{name}")
async def docs_asset(version: str, name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None or version != SWAGGER_UI_VERSION:
        raise NotFound(f"The docs have no file {version!r}/{name!r}.")
    return Response(
        _asset_bytes(name),
        media_type=media_type,
        headers=_headers(content_security_policy([]), "public, max-age=31536000, immutable"),
    )
